package main

// fcapctl's exit statuses, the same for every command (docs/fcapctl.md).
const (
	// exitOK: the command did what it was asked; for allow and reserve,
	// the cluster granted.
	exitOK = 0
	// exitError: the cluster could not be reached, a request failed, or a
	// verdict is the fail-open or fail-closed fallback rather than the
	// cluster's answer.
	exitError = 1
	// exitUsage: bad flags or arguments; nothing was sent.
	exitUsage = 2
	// exitDenied: allow or reserve was answered and refused (a cap is
	// full). Not an error: the cluster worked.
	exitDenied = 3
	// exitDegraded: status reached the cluster and printed it, but a
	// member is unreachable or failed, a node has joined none of its
	// seeds or holds no majority, or a partition is under-replicated or
	// claimed without its holders.
	exitDegraded = 4
)

const exitCodesHelp = `exit status: 0 done (allow/reserve: granted), 1 error (cluster unreachable,
request failed, or a fail-open/fail-closed fallback verdict), 2 usage,
3 denied (allow/reserve refused by a cap), 4 degraded (status: a member
unreachable or failed, a node joined to none of its seeds or without a
majority for strict caps, or a partition under-replicated or claimed
without its holders).`
