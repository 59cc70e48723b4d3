import type { Area } from '../../lib/area.ts';
import { DistributionSetupPage } from './setup.tsx';

export const area: Area = {
  id: 'distribution-setup',
  nav: {
    to: '/settings/distribution',
    label: { en: 'Distribution setup', de: 'Verteilung einrichten' },
    order: 82,
    module: 'distribution',
    capability: 'settings',
  },
  routes: [{ path: '/settings/distribution', element: <DistributionSetupPage /> }],
};
