import type { Area } from '../../lib/area.ts';
import { IntakeLogScreen } from './list.tsx';

export const area: Area = {
  id: 'intake-log',
  nav: { to: '/intake-log', label: { en: 'Intake log', de: 'Eingangsprotokoll' }, order: 80 },
  routes: [{ path: '/intake-log', element: <IntakeLogScreen /> }],
};
