import type { Area } from '../../lib/area.ts';
import { BoardScreen } from './board.tsx';

export const area: Area = {
  id: 'board',
  nav: { to: '/board', label: { en: 'Board', de: 'Board' }, order: 20, module: 'crm' },
  routes: [{ path: '/board', element: <BoardScreen /> }],
};
