import type { Area } from '../../lib/area.ts';
import { PasswordPage } from './password.tsx';
import { SignInPage } from './sign-in.tsx';

export const area: Area = {
  id: 'session',
  routes: [],
  publicRoutes: [
    { path: '/login', element: <SignInPage /> },
    { path: '/password', element: <PasswordPage /> },
  ],
};
