'use strict';
// A websocket-shootout server (hashrocket/websocket-shootout protocol) on
// Node `ws` 8, for `herald bench broadcast|echo` comparisons.
//
//   node server.js [PORT] [HOST] [PROCESSES]     (default 3000 127.0.0.1 1)
//
// Text frames are JSON mode: {"type":"echo"|"broadcast","payload":P}; echo
// answers with the same object, broadcast sends {"type":"broadcast",
// "payload":P} to every client (the sender included), then
// {"type":"broadcastResult","payload":P} to the sender.
// Binary frames are binary mode (round 2): byte 0 is 'e' or 'b'; echo sends
// the frame back, broadcast sends it to everyone, then a copy with byte 0
// set to 'r' to the sender. Any path is accepted.
//
// Like the shootout's own js/ws server: no permessage-deflate, the broadcast
// encoded once and the same buffer sent to every client. With PROCESSES > 1
// it runs as a Node cluster (one listening socket shared by the workers),
// and a broadcast is relayed to the other workers through the primary, as
// the shootout's run-cluster.js does; that is how more connections than one
// process may open files for (~19,000 here) can be served on one machine.
// The sender's broadcastResult then leaves once its own worker has sent the
// broadcast, before the other workers have: `herald bench` reports the
// all-received latency for exactly that reason.

const cluster = require('cluster');
const { WebSocketServer } = require('ws');

const port = Number(process.argv[2] || 3000);
const host = process.argv[3] || '127.0.0.1';
const processes = Math.max(1, Number(process.argv[4] || 1));

if (processes > 1 && cluster.isPrimary) {
  const workers = [];
  for (let i = 0; i < processes; i++) {
    const w = cluster.fork();
    workers.push(w);
    // Relay a worker's broadcast to every other worker.
    w.on('message', (msg) => {
      for (const other of workers) {
        if (other !== w) other.send(msg);
      }
    });
  }
  console.log(`node-ws shootout cluster: ${processes} processes on ws://${host}:${port}/`);
} else {
  serve();
}

function serve() {
  const wss = new WebSocketServer({ host, port, perMessageDeflate: false, clientTracking: true });
  const clustered = processes > 1;

  function broadcastLocal(buf, binary) {
    const opts = { binary };
    for (const client of wss.clients) {
      client.send(buf, opts);
    }
  }

  function broadcast(buf, binary) {
    if (clustered) {
      process.send({ b: buf.toString('base64'), binary });
    }
    broadcastLocal(buf, binary);
  }

  if (clustered) {
    process.on('message', (msg) => broadcastLocal(Buffer.from(msg.b, 'base64'), msg.binary));
  }

  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        const type = data[0];
        if (type === 0x65 /* e */) {
          ws.send(data, { binary: true });
        } else if (type === 0x62 /* b */) {
          broadcast(data, true);
          const result = Buffer.from(data);
          result[0] = 0x72; /* r */
          ws.send(result, { binary: true });
        } else {
          console.error('unknown binary message type', type);
        }
        return;
      }
      let msg;
      try {
        msg = JSON.parse(data);
      } catch (e) {
        console.error('bad JSON:', e.message);
        return;
      }
      switch (msg.type) {
        case 'echo':
          ws.send(JSON.stringify({ type: 'echo', payload: msg.payload }));
          break;
        case 'broadcast':
          broadcast(Buffer.from(JSON.stringify({ type: 'broadcast', payload: msg.payload })), false);
          ws.send(JSON.stringify({ type: 'broadcastResult', payload: msg.payload }));
          break;
        default:
          console.error('unknown message type:', msg.type);
      }
    });
    ws.on('error', () => {});
  });

  wss.on('listening', () => {
    if (!clustered) {
      const a = wss.address();
      console.log(`node-ws shootout server listening on ws://${a.address}:${a.port}/ (ws ${require('ws/package.json').version}, node ${process.version})`);
    }
  });
}
