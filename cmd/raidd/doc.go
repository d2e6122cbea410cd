// Command raidd combines regular files and block devices into RAID 0, 1, 5
// and 10 arrays and exports each array over NBD.
//
//	raidd create  --name NAME --level LEVEL [--chunk SIZE] [--size SIZE] [--force] MEMBER...
//	raidd serve   [--config FILE] [--listen ADDR]... [--control PATH] [--metrics-listen ADDR]
//	raidd status  [--config FILE | --control PATH] [--json] [ARRAY...]
//	raidd check   [--config FILE | --control PATH] [ARRAY...]
//	raidd examine [--json] MEMBER...
//
// This is the only package that imports cobra, pflag and viper, parses
// sizes such as "64KiB", or calls os.Exit. It turns flags, environment and
// the YAML file into the typed options of packages raid and nbd, and
// leaves every RAID and protocol decision to them.
//
// # Configuration
//
// serve reads a YAML file (--config, default $RAIDD_CONFIG), environment
// variables with the RAIDD_ prefix (nested keys joined with "_":
// RAIDD_NBD_MAX_PAYLOAD) and flags, in increasing precedence, with a
// non-global viper instance. Unknown keys are errors, and Config.Validate
// reports every problem at once before any device is opened.
// contrib/systemd/raidd.yaml documents every key.
//
// # Serving
//
// serve opens every member with an exclusive flock on its path (a shared
// one for read-only arrays) and, for block devices, O_EXCL, so that two
// raidd processes, or raidd and md or a mount, never drive one member.
// It assembles every array (refusing to start if any array cannot be
// assembled, and naming each refused member), opens every listener, then
// reports READY=1 to systemd (Type=notify). SIGINT and SIGTERM stop it
// gracefully: STOPPING=1, nbd.Server.Shutdown within shutdown_timeout, then
// raid.Array.Close, which syncs the members and marks the arrays clean. A
// second signal kills the process. SIGHUP is logged and ignored.
//
// # Control socket
//
// A unix socket (control, default /run/raidd/raidd.sock) serves HTTP with
// JSON bodies: GET /v1/status, POST /v1/arrays/{name}/check and GET
// /metrics (Prometheus text format). Access is governed by the socket's
// file permissions. status and check are its clients; metrics_listen can
// expose /metrics alone on TCP.
//
// # Exit codes
//
// 0 on success; 1 when the command fails, including when check finds an
// inconsistent array or examine a member without a valid superblock; 2 for
// a usage error (unknown command or flag, bad flag value).
package main
