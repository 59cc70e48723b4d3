import type { Area } from '../../lib/area.ts';
import { DistributionSetupPage } from './setup.tsx';

export const area: Area = {
  id: 'distribution-setup',
  routes: [{ path: '/settings/distribution', element: <DistributionSetupPage /> }],
};
