#!/usr/bin/env node
// graphile-worker burn-down: JOBS no-op jobs added in one add_jobs call,
// then drained by PROCESSES worker processes of CONCURRENCY each, started
// together with --once (each exits when the queue is empty). Prints one
// JSON line. Usage: node burn.js JOBS PROCESSES CONCURRENCY
// Environment: PGBASE (cluster URL without a database), NODE_PATH (a
// node_modules holding graphile-worker and pg).
const { execFileSync, execFile } = require("child_process");
const { Client } = require("pg");
const [jobs, processes, concurrency] = process.argv.slice(2).map(Number);
const base = process.env.PGBASE || "postgres://postgres@127.0.0.1:5432";
const url = `${base}/gw_peers`;
const cli = require.resolve("graphile-worker/dist/cli.js");
const env = { ...process.env, DATABASE_URL: url, GW_CONCURRENCY: String(concurrency), NO_LOG_SUCCESS: "1" };
const opts = { cwd: __dirname, env, stdio: ["ignore", "ignore", "inherit"] };

async function sql(db, text, params) {
  const c = new Client({ connectionString: db });
  await c.connect();
  try { return await c.query(text, params); } finally { await c.end(); }
}
const run = (args) => new Promise((ok, fail) =>
  execFile("node", [cli, ...args], opts, (e) => (e ? fail(e) : ok())));
const seconds = (t) => Number(process.hrtime.bigint() - t) / 1e9;

(async () => {
  await sql(`${base}/postgres`, "DROP DATABASE IF EXISTS gw_peers WITH (FORCE)");
  await sql(`${base}/postgres`, "CREATE DATABASE gw_peers");
  execFileSync("node", [cli, "--schema-only"], opts);
  let t = process.hrtime.bigint();
  await run(["--once", "-j", String(concurrency), "-m", String(concurrency + 1)]);
  const startup = seconds(t);
  const specs = JSON.stringify(Array.from({ length: jobs }, (_, i) => ({ identifier: "noop", payload: { n: i } })));
  t = process.hrtime.bigint();
  await sql(url, "SELECT graphile_worker.add_jobs(array(SELECT json_populate_recordset(NULL::graphile_worker.job_spec, $1::json)))", [specs]);
  const enqueue = seconds(t);
  await sql(url, "CHECKPOINT");
  t = process.hrtime.bigint();
  const workers = [];
  for (let i = 0; i < processes; i++) {
    workers.push(run(["--once", "-j", String(concurrency), "-m", String(concurrency + 1)]));
  }
  await Promise.all(workers);
  const drain = seconds(t);
  const left = (await sql(url, "SELECT count(*)::int AS n FROM graphile_worker._private_jobs")).rows[0].n;
  console.log(JSON.stringify({
    peer: "graphile-worker", version: require("graphile-worker/package.json").version,
    workload: "burn-down", jobs, processes, concurrency,
    startup_s: +startup.toFixed(3), enqueue_jobs_per_sec: Math.round(jobs / enqueue),
    drain_s: +drain.toFixed(3), jobs_per_sec: Math.round(jobs / drain), jobs_left: left,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
