import type { Area } from '../../lib/area.ts';
import { PartnerPage } from './detail.tsx';
import { NewPartner } from './form.tsx';
import { PartnersList } from './list.tsx';

export const area: Area = {
  id: 'partners',
  nav: { to: '/partners', label: { en: 'Partners', de: 'Partner' }, order: 32, module: 'distribution' },
  routes: [
    { path: '/partners', element: <PartnersList /> },
    { path: '/partners/new', element: <NewPartner /> },
    { path: '/partners/:id', element: <PartnerPage /> },
  ],
};
