import { BlockList, isIP } from 'node:net';

/** `::ffff:127.0.0.1` (a dual-stack socket) is `127.0.0.1`, so one client has one budget. */
export function plainAddress(addr: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  return mapped ? mapped[1]! : addr;
}

/** A matcher for TRUSTED_PROXIES entries (addresses and CIDR blocks, already validated by config). */
export function trustedPeers(entries: readonly string[]): (addr: string) => boolean {
  const list = new BlockList();
  for (const entry of entries) {
    const [addr, bits] = entry.split('/') as [string, string | undefined];
    const type = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(bits), type);
  }
  return (addr) => {
    const plain = plainAddress(addr);
    const family = isIP(plain);
    return family !== 0 && list.check(plain, family === 6 ? 'ipv6' : 'ipv4');
  };
}

/**
 * The address per-address budgets count: the socket's peer, unless that peer is a trusted proxy
 * (the front door), whose X-Forwarded-For ends with the address it saw. Earlier entries are the
 * client's own to forge, so only the last one is used, and only one hop.
 */
export function resolveClientAddress(isTrusted: (addr: string) => boolean, peerAddress: string, forwardedFor: string): string {
  const peer = plainAddress(peerAddress);
  if (!isTrusted(peer)) return peer;
  const forwarded = plainAddress(forwardedFor.split(',').pop()?.trim() ?? '');
  return isIP(forwarded) ? forwarded : peer;
}
