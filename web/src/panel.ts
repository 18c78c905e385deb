/**
 * The connection panel the poker and games pages share: state, transport,
 * client id and reconnects, and what to redo after a reconnect (the SDK
 * redoes nothing game-related: the page takes a fresh lobby snapshot and
 * sits or watches again to get its seat back).
 */

import type { Client } from "herald-client";

export function connectionPanel(client: Client, $: (id: string) => HTMLElement, rejoin: () => Promise<void>): void {
  let connectedOnce = false;
  let reconnects = 0;
  client.on("state", (s) => ($("state").textContent = s));
  client.on("connected", (info) => {
    $("transport").textContent = info.transport;
    $("client-id").textContent = info.client;
    if (connectedOnce) void rejoin();
    connectedOnce = true;
  });
  client.on("disconnected", () => ($("reconnects").textContent = String(++reconnects)));
  client.on("closed", (e) => {
    $("state").textContent = `closed${e ? `: ${e.message}` : ""}`;
  });
}
