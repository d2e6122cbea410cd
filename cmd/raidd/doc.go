// Command raidd combines regular files and block devices into RAID 0, 1, 5,
// 6 and 10 arrays and exports each array over NBD.
//
//	raidd create  --name NAME --level LEVEL [--chunk SIZE] [--size SIZE] [--spare PATH]... [--bitmap-region SIZE|none] [--checksums] [--consistency-policy ppl|bitmap] [--force] MEMBER...
//	raidd serve   [--config FILE] [--listen ADDR]... [--allow-remote] [--allow-remote-plaintext] [--tls MODE --tls-cert F --tls-key F [--tls-ca F]] [--control PATH] [--control-group GROUP] [--metrics-listen ADDR] [--on-event CMD] [--strict] [--force-assemble]
//	              [--name NAME] [--read-only] [--direct] [--write-mostly PATH]... [--rebuild-min-rate RATE] [--rebuild-max-rate RATE] [MEMBER...]
//	raidd demo    [--dir DIR] [--listen ADDR]... [--size SIZE] [--control PATH] [--on-event CMD]
//	raidd status  [--config FILE | --control PATH] [--json] [--watch [--interval 1s]] [ARRAY...]
//	raidd check   [--config FILE | --control PATH] [--repair] [ARRAY...]
//	raidd fail    [--config FILE | --control PATH] [--force] ARRAY MEMBER
//	raidd remove  [--config FILE | --control PATH] ARRAY MEMBER
//	raidd add     [--config FILE | --control PATH] [--force] ARRAY PATH
//	raidd replace [--config FILE | --control PATH] [--force] ARRAY OLD NEW
//	raidd examine [--json] MEMBER...
//	raidd assemble [--force [--accept-loss]] MEMBER...
//	raidd restore-header [--role N] [--force] DEVICE MEMBER...
//	raidd --version
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
// reports every problem at once before any device is opened. A RAIDD_
// variable that is no setting is an error naming the nearest setting
// (env.go); list values from the environment split at commas and white
// space.
// contrib/systemd/raidd.yaml documents every key.
//
// The tls block (tls.go; --tls, --tls-cert, --tls-key, --tls-ca) becomes
// nbd.Options.TLSMode and TLSConfig. Its files are read by Validate, so a
// bad one stops serve naming its key; with tls.ca set, client
// certificates are required and verified against it
// (tls.RequireAndVerifyClientCert), without it none is asked for.
//
// serve can also take the members of one array as arguments instead of a
// configured array list; the array's name then comes from their
// superblocks (or --name, which they must match).
//
// # Serving
//
// serve opens every member with an exclusive flock on its path (a shared
// one for read-only arrays), on a loop device's backing file as well, and,
// for block devices, O_EXCL, so that two raidd processes, or raidd and md
// or a mount, never drive one member. A writable member also carries this
// process's claim in its in-use block (members.go), which a second raidd
// reaching it by a path no lock covers is refused by; --force takes over a
// claim from another host whose holder is known to be dead. Only regular
// files and block devices are opened, and never in a way that blocks.
// It assembles every array, opens every listener, then reports READY=1 to
// systemd (Type=notify). An array that cannot be assembled (each refused
// member named with the reason) is left out: the others are served, and
// status, /metrics (raidd_array_failed, raidd_array_assembled) and an
// array-failed event report it as failed with the reason. With strict
// (--strict) serve refuses to start instead, as it does when no array can
// be assembled. SIGINT and SIGTERM stop it
// gracefully: STOPPING=1, nbd.Server.Shutdown within shutdown_timeout, then
// raid.Array.Close, which syncs the members and marks the arrays clean. A
// second signal kills the process. SIGHUP is logged and ignored.
//
// Each export is logged with its NBD URI (nbd://127.0.0.1:10809/NAME,
// nbd+unix:///NAME?socket=PATH). NBD has no authentication, so a TCP
// listen address that is not loopback needs allow_remote (--allow-remote),
// and TLS (tls.mode on or require) unless allow_remote_plaintext
// (--allow-remote-plaintext) is set (Config.remoteListenPolicy).
//
// # Service manager
//
// notify.go keeps systemd informed (Type=notify): READY=1 once serving,
// STATUS= lines with each array's state and job progress (sent when an
// array event changes them, and every 5s), STOPPING=1, and WATCHDOG=1 at
// half of WATCHDOG_USEC unless WATCHDOG_PID names another process. Sockets
// passed by socket activation (activation.go: LISTEN_PID, LISTEN_FDS,
// LISTEN_FDNAMES, descriptors from 3) replace the listen addresses; each
// must be a listening stream socket named "nbd" or left with systemd's
// default name, and the TLS policy applies to them. The variables are
// unset and the descriptors made close-on-exec, so on_event commands
// inherit neither.
//
// on_event (--on-event) runs a shell command for every raid.Event, like
// mdadm --monitor --program: one at a time, in order, each within 30s,
// from a queue that never blocks the arrays, with RAIDD_EVENT, RAIDD_ARRAY,
// RAIDD_ROLE (-1 for none), RAIDD_MEMBER, RAIDD_DETAIL and RAIDD_TIME
// (RFC 3339) in its environment. Failures are logged.
//
// # Control socket
//
// A unix socket (control, default /run/raidd/raidd.sock) serves HTTP with
// JSON bodies: GET /v1/status, POST /v1/arrays/{name}/check (a scrub,
// {"repair": true} to repair), the member
// changes POST /v1/arrays/{name}/fail, remove, add and replace (see
// control.go), and GET /metrics (Prometheus, metrics.go: a registry of
// its own with client_golang; a collector reads the status at each
// scrape, and each export's device is wrapped to time its requests). Access is
// governed by the socket's file permissions: it is created 0600 whatever
// the umask, or 0660 owned by control_group (--control-group), bound in a
// private directory and renamed into place so that it is never reachable
// with wider permissions. metrics_listen on an address that is not
// loopback needs allow_remote, as /metrics names arrays and member paths. status, check, fail, remove,
// add and replace are its clients; metrics_listen can expose /metrics
// alone on TCP. The daemon opens the devices of add and replace itself,
// locked like the members of serve.
//
// # Exit codes
//
// 0 on success; 1 when the command fails, including when check finds an
// inconsistent array or examine a member without a valid superblock; 2 for
// a usage error (unknown command or flag, bad flag value).
//
// status exits like mdadm --detail --test, with the worst state of the
// arrays it shows: 0 when all are fully redundant (clean, dirty or
// resyncing), 1 when one is degraded (rebuilding included), 2 when one has
// failed or could not be assembled, 4 when it could not read the status
// at all (raidd not running, an unknown array name, a bad configuration).
// A usage error exits 2 there too.
//
// # Errors across the control socket
//
// An error answer carries a code besides its message (errcode.go). The
// daemon picks the code of the first sentinel the error wraps; the client
// wraps the message around the same sentinel, so errors.Is(err,
// raid.ErrNoMember) holds in the client exactly when it held in the daemon.
package main
