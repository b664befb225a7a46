// Package httpapi serves fcap's operations as JSON over HTTP, for ad
// servers not written in Go. Every request goes through a smart client
// (package client), so it has the Go client's semantics: one hop to the
// viewer's owner from whichever node received it, deadlines, backup reads
// for soft caps, and fail-open or fail-closed verdicts marked as such.
// Start runs it for a node, over a client of its own seeded with the
// node (cmd/fcapd sets node.Config.API to it, and the node serves it
// under /v1/ on its HTTP address); New serves it over a client the
// caller has.
//
//	POST /v1/check    {"viewer", "candidates": [{"caps": [cap...]}], "now"?}
//	POST /v1/allow    {"viewer", "caps": [cap...], "now"?}
//	POST /v1/record   {"viewer", "impression": {"id", "time"?, "caps", "reservation"?}}
//	POST /v1/reserve  {"viewer", "candidate": {"caps"}, "ttl_ms", "now"?}
//	POST /v1/release  {"viewer", "reservation"}
//	POST /v1/link     {"device", "viewer"}  -> {"merged"}
//	POST /v1/unlink   {"device"}            -> {"viewer"}
//	DELETE /v1/viewers/{viewer}             -> 204 (erased everywhere)
//	POST /v1/void     {"viewer", "impression": {"id", "time", "caps"}} -> {"voided"}
//	POST /v1/resolve  {"device"}            -> {"viewer"}
//
// check, allow, record and reserve take "device" instead of "viewer" to
// name a device: it is resolved to the viewer it is linked to (cached,
// see client.Device) before the counters are touched.
//
// A cap is {"scope", "id", "limit", "window", "algorithm"?, "mode"?}.
// An impression's "time" is Unix milliseconds; 0 or none means now (this
// node's clock when it receives the record). A record is validated here, as its owner would validate
// it (the same checks, package fcap, with this node's limits), and an
// invalid one is refused with 400 naming the field and the values
// accepted; nothing is queued.
//
// The answer to a check carries, beside each verdict, "caps_remaining":
// how many more impressions each of the candidate's caps allows, in the
// order of its caps, so a caller can fill several slots (an ad pod) from
// one answer.
//
// docs/openapi.yaml describes every request, answer and status, and a
// test validates a live node's answers against it. Every error, 404 and
// 405 included, is {"error": "message", "code": "..."} (see the Code
// constants) with 400 for an invalid request (a time further ahead of
// the node's clock than it accepts among them; an X-Fcap-Timeout-Ms
// header outside 1..60000), 401 without an accepted bearer token, 404 for
// an unknown path or reservation, 405 for a method other than POST, 413
// for a body over the limit, 415 for a body that is not JSON, 502 when
// the cluster could not answer an operation without a failure policy
// (release, link, unlink, resolve), and 503 when a record cannot be
// queued or the node is shutting down.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// DefaultMaxBody is the default limit on a request body: room for a
// check of a few thousand candidates.
const DefaultMaxBody = 1 << 20

// Options configure the API.
type Options struct {
	// MaxBody limits request bodies, bytes. Default DefaultMaxBody.
	MaxBody int64
	// Timeout bounds each call to the cluster when the HTTP client does
	// not ask for less with the X-Fcap-Timeout-Ms header. Default: the
	// client's own Timeout.
	Timeout time.Duration
	// Bearer, when not nil, decides which bearer tokens are accepted
	// ("Authorization: Bearer TOKEN"), asked on every request (so it may
	// follow a reloaded tokens file) and expected to compare in constant
	// time; a request without an accepted one is refused with 401 and
	// changes nothing. nil: no authentication.
	Bearer func(token string) bool
	// Clock, when not nil, is the node's time in Unix milliseconds: a
	// record whose impression time is more than MaxClockSkew ahead of it
	// is refused with 400 here, as its owner would refuse it (a record is
	// queued, so the owner's refusal could only be counted as a drop).
	// Check, allow and reserve's "now" is judged by the owner, which
	// answers 400 too. nil: no such check here.
	Clock func() int64
	// MaxClockSkew is how far ahead of Clock an impression's time may be.
	MaxClockSkew time.Duration
	// RefusedTime, when set, is told of each call refused here for a
	// time ahead of Clock, by operation ("check", "allow", "reserve",
	// "record"), so the node counts it with the ones it refuses itself.
	RefusedTime func(op string)
}

// API is the HTTP handler.
type API struct {
	c    *client.Client
	opts Options
	mux  *http.ServeMux
}

// New returns the API over c.
func New(c *client.Client, opts Options) *API {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	a := &API{c: c, opts: opts, mux: http.NewServeMux()}
	routes := map[string]http.HandlerFunc{
		"/v1/check": a.check, "/v1/allow": a.allow, "/v1/record": a.record, "/v1/reserve": a.reserve,
		"/v1/release": a.release, "/v1/link": a.link, "/v1/unlink": a.unlink, "/v1/resolve": a.resolve,
		"/v1/void": a.void,
	}
	for path, h := range routes {
		a.mux.HandleFunc("POST "+path, h)
	}
	a.mux.HandleFunc("DELETE /v1/viewers/{viewer}", a.erase)
	a.mux.HandleFunc("/v1/viewers/{viewer}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodDelete)
		replyError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" "+r.URL.Path+": only DELETE is served")
	})
	// Everything else answers in the API's error shape, not the
	// ServeMux's text/plain: 405 for another method on a route, 404 for
	// an unknown path.
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if routes[r.URL.Path] != nil {
			w.Header().Set("Allow", http.MethodPost)
			replyError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" "+r.URL.Path+": only POST is served")
			return
		}
		replyError(w, http.StatusNotFound, CodeNotFound, "no such path: "+r.URL.Path+" (see docs/openapi.yaml)")
	})
	return a
}

// Code is the machine-readable "code" of an error answer.
type Code string

// The error codes, by status.
const (
	CodeBadRequest           Code = "bad_request"            // 400: the request is invalid; nothing changed
	CodeFutureTime           Code = "future_time"            // 400: a time further ahead of the node's clock than it accepts
	CodeUnauthenticated      Code = "unauthenticated"        // 401: no accepted bearer token
	CodeNotFound             Code = "not_found"              // 404: no such path
	CodeUnknownReservation   Code = "unknown_reservation"    // 404: the owner holds no such live reservation
	CodeMethodNotAllowed     Code = "method_not_allowed"     // 405: only POST is served
	CodeTooLarge             Code = "too_large"              // 413: the body is over the limit
	CodeUnsupportedMediaType Code = "unsupported_media_type" // 415: the body is not JSON
	CodeUnavailable          Code = "unavailable"            // 502: the cluster could not answer
	CodeQueueFull            Code = "queue_full"             // 503: the record queue is full
	CodeShuttingDown         Code = "shutting_down"          // 503: the node is shutting down
	CodeStarting             Code = "starting"               // 503: the node's API is not up yet
)

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.opts.Bearer != nil && !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fcap"`)
		replyError(w, http.StatusUnauthorized, CodeUnauthenticated, "unauthenticated: send Authorization: Bearer TOKEN with an adserver or operator token")
		return
	}
	a.mux.ServeHTTP(w, r)
}

// authorized reports whether the request carries an accepted bearer
// token.
func (a *API) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	return a.opts.Bearer(h[len(prefix):])
}

// Cap is a cap as JSON.
type Cap struct {
	Scope        string `json:"scope"`
	ID           string `json:"id"`
	Limit        int64  `json:"limit"`
	WindowMillis int64  `json:"window"` // milliseconds
	Algorithm    string `json:"algorithm,omitempty"`
	Mode         string `json:"mode,omitempty"`
}

// Candidate is a candidate ad as JSON.
type Candidate struct {
	Caps []Cap `json:"caps"`
}

// Verdict is a verdict as JSON.
type Verdict struct {
	Allowed    bool  `json:"allowed"`
	Remaining  int64 `json:"remaining"`
	Blocking   int   `json:"blocking"`
	FailOpen   bool  `json:"fail_open,omitempty"`
	FailClosed bool  `json:"fail_closed,omitempty"`
	Stale      bool  `json:"stale,omitempty"`
	// CapsRemaining (check only) is how many more impressions each cap
	// of the candidate allows, in the order of its caps; absent when
	// the verdict was decided by the failure policy.
	CapsRemaining []int64 `json:"caps_remaining,omitempty"`
}

// CheckRequest asks for verdicts on many candidates of one viewer.
type CheckRequest struct {
	Viewer     string      `json:"viewer,omitempty"`
	Device     string      `json:"device,omitempty"`
	Candidates []Candidate `json:"candidates"`
	Now        *int64      `json:"now,omitempty"`
}

// CheckResponse holds one verdict per candidate, in order.
type CheckResponse struct {
	Verdicts []Verdict `json:"verdicts"`
	Now      int64     `json:"now"`
}

// AllowRequest checks and records one impression atomically.
type AllowRequest struct {
	Viewer string `json:"viewer,omitempty"`
	Device string `json:"device,omitempty"`
	Caps   []Cap  `json:"caps"`
	Now    *int64 `json:"now,omitempty"`
}

// Impression is a played impression as JSON.
type Impression struct {
	ID          string `json:"id"`
	Time        int64  `json:"time"`
	Caps        []Cap  `json:"caps"`
	Reservation string `json:"reservation,omitempty"`
}

// RecordRequest reports a played impression.
type RecordRequest struct {
	Viewer     string     `json:"viewer,omitempty"`
	Device     string     `json:"device,omitempty"`
	Impression Impression `json:"impression"`
	// Ack is when the answer comes: AckQueued (the default) once the
	// impression is queued for sending, or AckReplicated once every
	// owner of the viewer applied it (client.RecordSync with
	// client.Replicated), so no single node's death can take it back.
	Ack string `json:"ack,omitempty"`
}

// The acknowledgements a record can ask for (RecordRequest.Ack).
const (
	AckQueued     = "queued"
	AckReplicated = "replicated"
)

// VoidRequest takes back a recorded impression, named as it was
// recorded: its id, time (required) and caps; a reservation is ignored.
type VoidRequest struct {
	Viewer     string     `json:"viewer"`
	Impression Impression `json:"impression"`
}

// VoidResponse says whether the owner had counted the impression (false:
// it holds no record of the id, which is now barred from counting).
type VoidResponse struct {
	Voided bool `json:"voided"`
}

// RecordResponse says whether the impression was queued for sending
// (202) or, for a replicated acknowledgement, that every owner applied
// it and what the owner did with it: recorded, duplicate (its id was
// counted before, maybe by an attempt of this request that was not
// acknowledged in time) or stale (older than its longest window) (200).
type RecordResponse struct {
	Queued     bool   `json:"queued"`
	Replicated bool   `json:"replicated,omitempty"`
	Status     string `json:"status,omitempty"`
}

// ReserveRequest holds one impression's worth of a candidate's caps.
type ReserveRequest struct {
	Viewer    string    `json:"viewer,omitempty"`
	Device    string    `json:"device,omitempty"`
	Candidate Candidate `json:"candidate"`
	TTLMillis int64     `json:"ttl_ms"`
	Now       *int64    `json:"now,omitempty"`
}

// ReserveResponse is the verdict and, when granted, the reservation id
// (a decimal string: it is a 64-bit number).
type ReserveResponse struct {
	Verdict     Verdict `json:"verdict"`
	Reservation string  `json:"reservation,omitempty"`
	// Viewer holds the reservation: the device's viewer when the request
	// named a device. Release it with this viewer.
	Viewer string `json:"viewer,omitempty"`
}

// ReleaseRequest drops a reservation.
type ReleaseRequest struct {
	Viewer      string `json:"viewer"`
	Reservation string `json:"reservation"`
}

// LinkRequest links a device to a viewer.
type LinkRequest struct {
	Device string `json:"device"`
	Viewer string `json:"viewer"`
}

// LinkResponse counts the device's impressions merged into the viewer.
type LinkResponse struct {
	Merged int64 `json:"merged"`
}

// DeviceRequest names a device (unlink, resolve).
type DeviceRequest struct {
	Device string `json:"device"`
}

// ViewerResponse names a viewer: the one a device was linked to
// (unlink; "" if none) or counts as (resolve; itself when unlinked).
type ViewerResponse struct {
	Viewer string `json:"viewer"`
}

// Error is every error answer.
type Error struct {
	Error string `json:"error"`
	Code  Code   `json:"code"`
}

// errInvalid marks request errors found before the cluster is asked.
var errInvalid = errors.New("invalid request")

// call is an operation ready to send to the cluster: it makes the call
// within ctx and returns the answer's body (nil: none).
type call func(ctx context.Context) (any, error)

// noDeadline is the timeout of a call that does not wait for the
// cluster (a record is queued): it gets none, and the X-Fcap-Timeout-Ms
// header is not read.
const noDeadline time.Duration = -1

// handle is every route's shape: decode the body into req (none when req
// is nil), let prepare check the request before the cluster is asked and
// return the call, bound the call (see context; timeout as its def, or
// noDeadline), make it, and answer status with what it returned. The
// first error is answered (fail) and ends the request.
func (a *API) handle(w http.ResponseWriter, r *http.Request, req any, status int, timeout time.Duration, prepare func() (call, error)) {
	if req != nil && !a.decode(w, r, req) {
		return
	}
	do, err := prepare()
	if err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	if timeout != noDeadline {
		var cancel context.CancelFunc
		if ctx, cancel, err = a.context(r, timeout); err != nil {
			fail(w, err)
			return
		}
		defer cancel()
	}
	out, err := do(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	if out == nil {
		w.WriteHeader(status)
		return
	}
	if sr, ok := out.(statusReply); ok {
		status, out = sr.status, sr.body
	}
	reply(w, status, out)
}

func (a *API) check(w http.ResponseWriter, r *http.Request) {
	var req CheckRequest
	a.handle(w, r, &req, http.StatusOK, 0, func() (call, error) {
		if len(req.Candidates) == 0 {
			return nil, fmt.Errorf("%w: candidates: at least one candidate is required", errInvalid)
		}
		cands := make([]fcap.Candidate, len(req.Candidates))
		for i, c := range req.Candidates {
			caps, err := toCaps(c.Caps)
			if err != nil {
				return nil, fmt.Errorf("candidate %d: %w", i, err)
			}
			cands[i] = fcap.Candidate{Caps: caps}
		}
		id, opts, err := a.target("check", req.Viewer, req.Device, req.Now)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) {
			res, err := a.c.Check(ctx, id, cands, opts...)
			if err != nil && !policyAnswered(err, len(res.Verdicts) > 0) {
				return nil, err
			}
			out := CheckResponse{Verdicts: make([]Verdict, len(res.Verdicts)), Now: res.Now}
			for i, v := range res.Verdicts {
				out.Verdicts[i] = toVerdict(v)
				out.Verdicts[i].CapsRemaining = res.CapsRemaining(i)
			}
			return out, nil
		}, nil
	})
}

func (a *API) allow(w http.ResponseWriter, r *http.Request) {
	var req AllowRequest
	a.handle(w, r, &req, http.StatusOK, 0, func() (call, error) {
		caps, err := toCaps(req.Caps)
		if err != nil {
			return nil, err
		}
		id, opts, err := a.target("allow", req.Viewer, req.Device, req.Now)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) {
			v, err := a.c.Allow(ctx, id, caps, opts...)
			if policyAnswered(err, v.Failed()) {
				err = nil
			}
			return toVerdict(v), err
		}, nil
	})
}

func (a *API) record(w http.ResponseWriter, r *http.Request) {
	var req RecordRequest
	a.handle(w, r, &req, http.StatusAccepted, noDeadline, func() (call, error) {
		imp, err := a.impression("record", &req.Impression)
		if err != nil {
			return nil, err
		}
		switch req.Ack {
		case "", AckQueued:
		case AckReplicated:
			if req.Device != "" {
				return nil, fmt.Errorf("%w: ack: %q takes a viewer, not a device", errInvalid, AckReplicated)
			}
			return a.recordReplicated(r, req.Viewer, imp)
		default:
			return nil, fmt.Errorf("%w: ack: %q is neither %q nor %q", errInvalid, req.Ack, AckQueued, AckReplicated)
		}
		id, _, err := a.target("record", req.Viewer, req.Device, nil)
		if err != nil {
			return nil, err
		}
		// Record validates the impression as its owner would (the
		// client's Limits are this node's) and refuses it at once: a 400
		// here, not a drop counted later. A time of 0 (or none) is now,
		// by this node's clock (client.Record stamps it).
		return func(context.Context) (any, error) {
			var err error
			if req.Device != "" {
				err = a.c.RecordDevice(id, imp)
			} else {
				err = a.c.Record(id, imp)
			}
			if policyAnswered(err, true) { // queued all the same
				err = nil
			}
			return RecordResponse{Queued: true}, err
		}, nil
	})
}

// recordReplicated is a record that answers once every owner of the
// viewer applied the impression (200), bounded by the X-Fcap-Timeout-Ms
// header or identityTimeout; past it, 502 with the impression's fate
// unknown: send it again (its id makes that safe).
func (a *API) recordReplicated(r *http.Request, viewer string, imp fcap.Impression) (call, error) {
	if viewer == "" {
		return nil, fmt.Errorf("%w: viewer: required", errInvalid)
	}
	ctx, cancel, err := a.context(r, identityTimeout)
	if err != nil {
		return nil, err
	}
	return func(context.Context) (any, error) {
		defer cancel()
		ack := a.c.RecordSync(ctx, []client.RecordItem{{Viewer: viewer, Impression: imp}}, client.Replicated())[0]
		if ack.Err != nil {
			return nil, ack.Err
		}
		return statusReply{http.StatusOK, RecordResponse{Replicated: true, Status: ack.Status.String()}}, nil
	}, nil
}

// statusReply is a call's answer with a status other than the route's.
type statusReply struct {
	status int
	body   any
}

// void answers POST /v1/void: the impression stops counting everywhere
// (client.Void), 200 once its owner logged the void and every backup
// applied it.
func (a *API) void(w http.ResponseWriter, r *http.Request) {
	var req VoidRequest
	a.handle(w, r, &req, http.StatusOK, identityTimeout, func() (call, error) {
		imp, err := a.impression("void", &req.Impression)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) {
			voided, err := a.c.Void(ctx, req.Viewer, imp)
			return VoidResponse{Voided: voided}, err
		}, nil
	})
}

// impression converts an impression from JSON, refusing a time further
// ahead of this node's clock than MaxClockSkew here, as its owner would.
func (a *API) impression(op string, in *Impression) (fcap.Impression, error) {
	caps, err := toCaps(in.Caps)
	if err != nil {
		return fcap.Impression{}, err
	}
	imp := fcap.Impression{ID: in.ID, Time: in.Time, Caps: caps}
	if in.Reservation != "" && op == "record" {
		if imp.Reservation, err = strconv.ParseUint(in.Reservation, 10, 64); err != nil {
			return fcap.Impression{}, fmt.Errorf("%w: reservation %q is not a decimal id", errInvalid, in.Reservation)
		}
	}
	if c := a.opts.Clock; c != nil && imp.Time != 0 {
		if ahead := imp.Time - c(); ahead > a.opts.MaxClockSkew.Milliseconds() {
			a.refusedTime(op)
			return fcap.Impression{}, fmt.Errorf("%w: impression time %d is %d ms ahead of the node's clock, at most %d accepted", client.ErrFutureTime, imp.Time, ahead, a.opts.MaxClockSkew.Milliseconds())
		}
	}
	return imp, nil
}

func (a *API) reserve(w http.ResponseWriter, r *http.Request) {
	var req ReserveRequest
	a.handle(w, r, &req, http.StatusOK, 0, func() (call, error) {
		caps, err := toCaps(req.Candidate.Caps)
		if err != nil {
			return nil, err
		}
		if req.TTLMillis <= 0 {
			return nil, fmt.Errorf("%w: ttl_ms must be positive", errInvalid)
		}
		id, opts, err := a.target("reserve", req.Viewer, req.Device, req.Now)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (any, error) {
			v, res, err := a.c.Reserve(ctx, id, fcap.Candidate{Caps: caps}, fcap.Millis(req.TTLMillis), opts...)
			if policyAnswered(err, v.Failed()) {
				err = nil
			}
			out := ReserveResponse{Verdict: toVerdict(v)}
			if res.ID != 0 {
				out.Reservation = strconv.FormatUint(res.ID, 10)
				out.Viewer = res.Viewer
			}
			return out, err
		}, nil
	})
}

func (a *API) release(w http.ResponseWriter, r *http.Request) {
	var req ReleaseRequest
	a.handle(w, r, &req, http.StatusOK, 0, func() (call, error) {
		if req.Viewer == "" {
			return nil, fmt.Errorf("%w: viewer: the viewer holding the reservation (reserve answered it) is required", errInvalid)
		}
		id, err := strconv.ParseUint(req.Reservation, 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%w: reservation %q is not a decimal id (1 to 18446744073709551615)", errInvalid, req.Reservation)
		}
		return func(ctx context.Context) (any, error) {
			return struct{}{}, a.c.Release(ctx, client.Reservation{Viewer: req.Viewer, ID: id})
		}, nil
	})
}

func (a *API) link(w http.ResponseWriter, r *http.Request) {
	var req LinkRequest
	a.handle(w, r, &req, http.StatusOK, identityTimeout, func() (call, error) {
		return func(ctx context.Context) (any, error) {
			n, err := a.c.Link(ctx, req.Device, req.Viewer)
			return LinkResponse{Merged: n}, err
		}, nil
	})
}

func (a *API) unlink(w http.ResponseWriter, r *http.Request) {
	var req DeviceRequest
	a.handle(w, r, &req, http.StatusOK, identityTimeout, func() (call, error) {
		return func(ctx context.Context) (any, error) {
			was, err := a.c.Unlink(ctx, req.Device)
			return ViewerResponse{Viewer: was}, err
		}, nil
	})
}

// erase answers DELETE /v1/viewers/{viewer}: the viewer is forgotten
// everywhere (client.Erase), 204 once its owner and every backup erased
// it.
func (a *API) erase(w http.ResponseWriter, r *http.Request) {
	a.handle(w, r, nil, http.StatusNoContent, identityTimeout, func() (call, error) {
		return func(ctx context.Context) (any, error) {
			return nil, a.c.Erase(ctx, r.PathValue("viewer"))
		}, nil
	})
}

func (a *API) resolve(w http.ResponseWriter, r *http.Request) {
	var req DeviceRequest
	a.handle(w, r, &req, http.StatusOK, 0, func() (call, error) {
		return func(ctx context.Context) (any, error) {
			v, err := a.c.Resolve(ctx, req.Device)
			return ViewerResponse{Viewer: v}, err
		}, nil
	})
}

// target is the id a call names and its options: the viewer, or the
// device to resolve (exactly one of them). A call's time further ahead of
// this node's clock than MaxClockSkew is refused here, at the edge, as a
// record's is: the owner would refuse it too, and a 400 must not depend
// on whether the cluster answered in time.
func (a *API) target(op, viewer, device string, now *int64) (string, []client.CallOption, error) {
	if c := a.opts.Clock; c != nil && now != nil {
		if ahead := *now - c(); ahead > a.opts.MaxClockSkew.Milliseconds() {
			a.refusedTime(op)
			return "", nil, fmt.Errorf("%w: now %d is %d ms ahead of the node's clock, at most %d accepted", client.ErrFutureTime, *now, ahead, a.opts.MaxClockSkew.Milliseconds())
		}
	}
	opts := at(now)
	switch {
	case viewer != "" && device != "":
		return "", nil, fmt.Errorf("%w: give viewer or device, not both", errInvalid)
	case device != "":
		return device, append(opts, client.Device()), nil
	}
	return viewer, opts, nil
}

func (a *API) refusedTime(op string) {
	if a.opts.RefusedTime != nil {
		a.opts.RefusedTime(op)
	}
}

// identityTimeout bounds a link, unlink, erase or void without an
// X-Fcap-Timeout-Ms header: they wait for other nodes.
const identityTimeout = 5 * time.Second

// TimeoutHeader names the header that bounds a call to the cluster, in
// milliseconds: 1 to MaxTimeoutMs.
const (
	TimeoutHeader = "X-Fcap-Timeout-Ms"
	MaxTimeoutMs  = 60_000
)

// decode reads a JSON body of at most MaxBody bytes into v, answering
// the error itself when it cannot.
func (a *API) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" && !hasPrefix(ct, "application/json;") {
		replyError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type must be application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, a.opts.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			replyError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("body over %d bytes", a.opts.MaxBody))
			return false
		}
		replyError(w, http.StatusBadRequest, CodeBadRequest, "bad JSON: "+jsonProblem(err))
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		replyError(w, http.StatusBadRequest, CodeBadRequest, "bad JSON: more than one value in the body")
		return false
	}
	return true
}

// jsonProblem says what is wrong with a body in the request's terms:
// the JSON field and the type it takes, not encoding/json's Go struct
// fields and Go types ("Go struct field Cap.candidates.caps.window of
// type int64").
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return fmt.Sprintf("the body is %s, want %s", typeErr.Value, jsonType(typeErr.Type))
		}
		return fmt.Sprintf("field %q is %s, want %s", field, typeErr.Value, jsonType(typeErr.Type))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(syntaxErr.Error(), "json: "), syntaxErr.Offset)
	case errors.Is(err, io.EOF):
		return "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends in the middle of a value"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonType names the JSON a Go type decodes from.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

// context bounds the call: by the X-Fcap-Timeout-Ms header, else by def
// when it is not 0, else by Options.Timeout. A header that is not a
// whole number of milliseconds in [1, MaxTimeoutMs] is an error (a 400):
// a caller that asked for a deadline must not silently get another.
func (a *API) context(r *http.Request, def time.Duration) (context.Context, context.CancelFunc, error) {
	d := a.opts.Timeout
	if def > 0 {
		d = def
	}
	if h, ok := r.Header[TimeoutHeader]; ok {
		ms, err := strconv.ParseInt(strings.TrimSpace(strings.Join(h, ",")), 10, 64)
		if err != nil || ms < 1 || ms > MaxTimeoutMs {
			return nil, nil, fmt.Errorf("%w: header %s: %q is not a whole number of milliseconds in [1, %d]", errInvalid, TimeoutHeader, strings.Join(h, ","), MaxTimeoutMs)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d <= 0 {
		ctx, cancel := context.WithCancel(r.Context())
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}

func at(now *int64) []client.CallOption {
	if now == nil {
		return nil
	}
	return []client.CallOption{client.At(*now)}
}

func toCaps(in []Cap) ([]fcap.Cap, error) {
	out := make([]fcap.Cap, len(in))
	for i, c := range in {
		alg, err := fcap.ParseAlgorithm(c.Algorithm)
		if err != nil {
			return nil, fmt.Errorf("%w: cap %d: %v", errInvalid, i, err)
		}
		mode, err := fcap.ParseMode(c.Mode)
		if err != nil {
			return nil, fmt.Errorf("%w: cap %d: %v", errInvalid, i, err)
		}
		out[i] = fcap.Cap{Scope: c.Scope, ID: c.ID, Limit: c.Limit, Window: fcap.Millis(c.WindowMillis), Algorithm: alg, Mode: mode}
	}
	return out, nil
}

// policyAnswered reports whether err only says that the API's client
// has never reached the cluster, beside an answer the failure policy
// gave (answered: marked verdicts, or a queued impression). The JSON API
// answers with those, as for a cluster that is down: its callers get the
// policy's verdicts either way, and the node's fcap_client_cluster_reached
// says the rest.
func policyAnswered(err error, answered bool) bool {
	return answered && errors.Is(err, client.ErrUnavailable)
}

func toVerdict(v client.Verdict) Verdict {
	return Verdict{Allowed: v.Allowed, Remaining: v.Remaining, Blocking: v.Blocking, FailOpen: v.FailOpen, FailClosed: v.FailClosed, Stale: v.Stale}
}

// fail answers an error: 400 for anything the request got wrong, 404
// for a reservation the owner does not hold, 503 when the record queue
// is full or the client closed, 502 for a cluster that could not answer
// an operation without a failure policy.
func fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fcap.ErrFutureTime):
		replyError(w, http.StatusBadRequest, CodeFutureTime, err.Error())
	case errors.Is(err, errInvalid), errors.Is(err, fcap.ErrInvalid):
		replyError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.Is(err, client.ErrUnknownReservation):
		replyError(w, http.StatusNotFound, CodeUnknownReservation, err.Error())
	case errors.Is(err, client.ErrQueueFull):
		replyError(w, http.StatusServiceUnavailable, CodeQueueFull, "record queue full: retry later")
	case errors.Is(err, client.ErrClosed):
		replyError(w, http.StatusServiceUnavailable, CodeShuttingDown, "shutting down")
	default:
		replyError(w, http.StatusBadGateway, CodeUnavailable, err.Error())
	}
}

func replyError(w http.ResponseWriter, status int, code Code, msg string) {
	reply(w, status, Error{Error: msg, Code: code})
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
