/** Seconds before each retry (decisions §8): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h. */
export const DEFAULT_RETRY_SCHEDULE_S = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400];
