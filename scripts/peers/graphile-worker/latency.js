#!/usr/bin/env node
// graphile-worker idle latency: one worker of concurrency 1 in this process;
// SAMPLES jobs added one at a time with add_job, each after the previous
// one started; the time from just before add_job to the task's first line.
// Run after burn.js (it uses the gw_peers database). Prints one JSON line.
// Usage: node latency.js [SAMPLES]
const { Pool } = require("pg");
const { runTaskList, Logger } = require("graphile-worker");
const samples = Number(process.argv[2] || 1000);
const base = process.env.PGBASE || "postgres://postgres@127.0.0.1:5432";
const pool = new Pool({ connectionString: `${base}/gw_peers` });
const sent = new Map();
const started = new Map();
const waiting = new Map();
const tasks = {
  probe: async ({ n }) => {
    started.set(n, process.hrtime.bigint());
    const wake = waiting.get(n);
    if (wake) wake();
  },
};
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

(async () => {
  // Standard output carries the result only: errors go to standard error,
  // the rest is dropped.
  const logger = new Logger(() => (level, message) => {
    if (level === "error") console.error(message);
  });
  const worker = runTaskList({ concurrency: 1, logger }, tasks, pool);
  const client = await pool.connect();
  // Three unsampled warm-up jobs, then the samples.
  for (let n = -3; n < samples; n++) {
    const done = new Promise((ok) => waiting.set(n, ok));
    sent.set(n, process.hrtime.bigint());
    await client.query("SELECT graphile_worker.add_job('probe', json_build_object('n', $1::int))", [n]);
    await done;
    await new Promise((ok) => setTimeout(ok, 10));
  }
  client.release();
  const ms = [];
  for (let n = 0; n < samples; n++) ms.push(Number(started.get(n) - sent.get(n)) / 1e6);
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({
    peer: "graphile-worker", version: require("graphile-worker/package.json").version,
    workload: "latency", samples, p50_ms: +pct(ms, 50).toFixed(3), p95_ms: +pct(ms, 95).toFixed(3),
    p99_ms: +pct(ms, 99).toFixed(3), max_ms: +ms[ms.length - 1].toFixed(3),
  }));
  await worker.gracefulShutdown();
  await pool.end();
})().catch((e) => { console.error(e); process.exit(1); });
