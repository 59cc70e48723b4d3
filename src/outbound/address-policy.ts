import { lookup } from 'node:dns/promises';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which addresses outbound requests may reach (decisions §4). Only plain unicast addresses
 * pass: private, loopback, link-local (cloud metadata included), CGNAT, unique-local,
 * multicast, reserved and unspecified ranges are refused, and so are IPv6 forms that embed an
 * IPv4 address (mapped, 6to4, NAT64, Teredo), so that no spelling reaches a refused address.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses; replaceable so that tests need no real DNS. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) => {
  const results = await lookup(hostname, { all: true, verbatim: true });
  return results.map((result) => ({ address: result.address, family: result.family === 6 ? 6 : 4 }));
};

export interface AddressPolicy {
  /** Whether a connection to this address (on this port) may be made. */
  allows(address: string, port: number): boolean;
}

export function createAddressPolicy(allowPrivate: boolean): AddressPolicy {
  return { allows: (address) => allowPrivate || isPublicAddress(address) };
}

export class BlockedAddressError extends Error {
  constructor(host: string) {
    super(`${host} resolves to an address that may not be reached`);
    this.name = 'BlockedAddressError';
  }
}

/**
 * The address to connect to for a URL's host: an IP literal as it is (WHATWG URL parsing has
 * already turned decimal, octal and hex spellings into dotted form), else every resolved address
 * must pass the policy, and the first one is used, so the connection goes where it was checked.
 */
export async function pinAddress(
  hostname: string,
  port: number,
  policy: AddressPolicy,
  resolve: Resolver,
): Promise<ResolvedAddress> {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  const family = net.isIP(bare);
  const candidates: ResolvedAddress[] = family
    ? [{ address: bare, family: family === 6 ? 6 : 4 }]
    : await resolve(bare);
  if (candidates.length === 0 || candidates.some((candidate) => !policy.allows(candidate.address, port))) {
    throw new BlockedAddressError(hostname);
  }
  return candidates[0]!;
}
