// What an area of the console brings: its routes and, optionally, one navigation entry.
// Register an area with one line in src/registry.ts (see console/README.md).
import type { RouteObject } from 'react-router';
import type { Locale } from './i18n.tsx';
import type { Capability } from './session.tsx';

export interface NavEntry {
  /** The address the entry opens, e.g. `/records`. */
  to: string;
  label: Record<Locale, string>;
  /** Position in the navigation, smaller first. */
  order: number;
  /** Shown only when the account has booked this module. */
  module?: string;
  /** Shown only to roles with this capability. */
  capability?: Capability;
}

export interface Area {
  id: string;
  /** Routes inside the signed-in layout (paths absolute, e.g. `/records/:id`). */
  routes: RouteObject[];
  /** Routes outside it, for people not signed in (the sign-in pages). */
  publicRoutes?: RouteObject[];
  nav?: NavEntry;
}
