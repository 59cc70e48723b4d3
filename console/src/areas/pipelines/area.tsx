import type { Area } from '../../lib/area.ts';
import { PipelinesSettings } from './pipelines.tsx';

export const area: Area = {
  id: 'pipelines',
  routes: [{ path: '/settings/pipelines', element: <PipelinesSettings /> }],
};
