// BullMQ (FlowProducer) on ffbench's chain scenario, for comparisons made
// in the same minutes (the machine's speed drifts): runs of 10 dependent
// no-op jobs (a flow nested 10 deep: children finish before their parent),
// `inflight` producers each adding a run and waiting for its last job, one
// worker of concurrency 16, a fresh redis-server (from PATH) per run.
//
//   npm install && node chain.mjs [runs=2000] [inflight=16]
import { spawn } from 'node:child_process';
import net from 'node:net';
import { FlowProducer, Worker, QueueEvents } from 'bullmq';

const runs = Number(process.argv[2] || 2000), inflight = Number(process.argv[3] || 16), length = 10;
const port = await new Promise(r => { const s = net.createServer().listen(0, () => { const p = s.address().port; s.close(() => r(p)); }); });
const redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
await new Promise(r => setTimeout(r, 300));
const connection = { host: '127.0.0.1', port };
const q = 'chain';
const worker = new Worker(q, async () => ({ ok: 1 }), { connection, concurrency: 16 });
const events = new QueueEvents(q, { connection });
await events.waitUntilReady();
const flows = new FlowProducer({ connection });
flows.setMaxListeners(inflight + 16);
function chain(i) {
  let node = { name: 's0', queueName: q, data: { i } };
  for (let k = 1; k < length; k++) node = { name: 's' + k, queueName: q, data: { i }, children: [node] };
  return node;
}
const lat = [];
let next = 0;
const begin = process.hrtime.bigint();
await Promise.all(Array.from({ length: inflight }, async () => {
  for (;;) {
    const i = next++;
    if (i >= runs) return;
    const t0 = process.hrtime.bigint();
    const tree = await flows.add(chain(i));
    await tree.job.waitUntilFinished(events, 60000);
    lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
}));
const secs = Number(process.hrtime.bigint() - begin) / 1e9;
lat.sort((a, b) => a - b);
const pct = p => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))].toFixed(2);
console.log(`bullmq chain ${runs} runs x ${length} in ${secs.toFixed(3)}s: ${Math.round(runs / secs)} runs/s; p50 ${pct(0.5)}ms p99 ${pct(0.99)}ms (${inflight} in flight)`);
await worker.close(); await events.close(); await flows.close();
redis.kill();
process.exit(0);
