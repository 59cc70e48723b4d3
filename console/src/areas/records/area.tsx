import type { Area } from '../../lib/area.ts';
import { RecordsList } from './list.tsx';
import { RecordPage } from './record.tsx';

export const area: Area = {
  id: 'records',
  nav: { to: '/records', label: { en: 'Records', de: 'Datensätze' }, order: 10 },
  routes: [
    { path: '/records', element: <RecordsList /> },
    { path: '/records/:id', element: <RecordPage /> },
  ],
};
