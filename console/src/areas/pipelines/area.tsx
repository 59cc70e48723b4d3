import type { Area } from '../../lib/area.ts';
import { PipelinesSettings } from './pipelines.tsx';

export const area: Area = {
  id: 'pipelines',
  nav: {
    to: '/settings/pipelines',
    label: { en: 'Pipelines', de: 'Pipelines' },
    order: 80,
    capability: 'settings',
  },
  routes: [{ path: '/settings/pipelines', element: <PipelinesSettings /> }],
};
