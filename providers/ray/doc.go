// Package ray is the "ray" provider: each worker is one Ray job, submitted
// to a Ray head's Jobs REST API (the dashboard, :8265 by default) by the
// package's own small client (client.go), whose entrypoint is
// `wdc agent --server ADVERTISE --pool P …`: the pool's wdc_path, or, when
// it has none, ./wdc-agent from the agent's Ray package (package.go),
// which the job's runtime_env.working_dir names.
//
//	Launch ──GET, else PUT /api/packages/gcs/_ray_pkg_<hash>.zip──▶ the agent's package (no wdc_path; once per binary and head)
//	Launch ──POST /api/jobs/──▶ job wdc-<pool>-<seq>-<hash> (PENDING → RUNNING)
//	   │                          │  runtime_env.env_vars: WDC_LAUNCH_CREDENTIAL, env
//	   │                          │  metadata: wdc.managed-by, wdc.lineage, wdc.apply-id, wdc.pool, wdc.launch-seq
//	   ▼                          ▼
//	poller ──GET /api/jobs/{id} every 500 ms──▶ SUCCEEDED / FAILED / STOPPED: Wait returns
//	   └─────GET /api/jobs/{id}/logs──▶ the worker log (appended as it grows)
//	Stop ──POST /api/jobs/{id}/stop──▶ SIGTERM to the entrypoint's tree, SIGKILL 3 s later
//	Cleanup ──(stop, wait)──▶ last logs ──DELETE /api/jobs/{id}
//	Reclaim ──GET /api/jobs/──▶ jobs whose metadata names this lineage and a dead apply: stop, delete
//	         (on the heads of the settings and of the launch records)
//
// The submission id is a function of (state lineage, apply id, pool,
// launch sequence), so a submission retried after its answer was lost is
// answered "already exists" and attaches to its own job, and a replacement
// never reuses an id (Ray does not support reusing one after DELETE). The
// credential is only in runtime_env.env_vars, which anyone who can read
// the job sees: that is why it is one-time. Ray keeps no exit code for a
// STOPPED job, so a worker stopped by wdc ends with none.
//
// The package owns a pool's ray { } block too: its schema, defaults and
// checks (Schema), decoded into *Settings, which every launch request of
// the pool carries back. Package engine decides when to launch and stop;
// this package only speaks Ray's API.
package ray
