import type { Area } from '../../lib/area.ts';
import { DeliveriesList } from './list.tsx';

export const area: Area = {
  id: 'deliveries',
  nav: {
    to: '/deliveries',
    label: { en: 'Deliveries', de: 'Lieferungen' },
    order: 30,
    module: 'distribution',
  },
  routes: [{ path: '/deliveries', element: <DeliveriesList /> }],
};
