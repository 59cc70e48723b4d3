// The console's areas, one line each: `export { area as <name> } from './areas/<name>/area.tsx';`
// Navigation order comes from each area's `nav.order`, not from the order here.

export { area as board } from './areas/board/area.tsx';
export { area as deliveries } from './areas/deliveries/area.tsx';
export { area as distributionSetup } from './areas/distribution-setup/area.tsx';
export { area as intakeLog } from './areas/intake-log/area.tsx';
export { area as partners } from './areas/partners/area.tsx';
export { area as pipelines } from './areas/pipelines/area.tsx';
export { area as records } from './areas/records/area.tsx';
export { area as session } from './areas/session/area.tsx';
export { area as settings } from './areas/settings/area.tsx';
