// Package httpqueue serves a queue.Queue over HTTP (Handler), so that
// workers on other machines lease segment jobs from the coordinator's
// embedded queue, and calls such a server (Client, itself a queue.Queue),
// so that a worker's code is the same whatever the transport.
//
// # Protocol
//
// The routes are under a prefix (HandlerOptions.Prefix, /queue by
// default) and speak JSON. Durations are Go duration strings ("30s",
// "1m30s"), times are RFC 3339 with nanoseconds, payloads are base64.
//
//	Route                 Request body                             Answer
//	POST /queue/enqueue   {"jobs": [{"id", "payload", "delay"}]}   200 {"added": [ids], "existing": [ids]}
//	POST /queue/lease     {"max", "visibility", "wait", "owner"}   200 {"leases": [{"job", "token", "attempt", "expires"}]}
//	POST /queue/extend    {"token", "visibility"}                  200 {"expires"}
//	POST /queue/ack       {"tokens": [tokens]}                     204
//	POST /queue/nack      {"token", "cause"}                       204
//	POST /queue/release   {"token"}                                204
//	GET  /queue/jobs/{id}                                          200 {"job", "state", "enqueued_at", "visible_at", "failures", "cause", "token", "owner", "expires", "died_at"}
//	GET  /queue/stats                                              200 {"ready", "delayed", "leased", "dead"}
//	GET  /queue/dead                                               200 {"jobs": [as /jobs/{id}]}
//
// Each route is the queue.Queue method of its name, with the arguments and
// results it documents. The {id} of /jobs/{id} is path-escaped, "/" and "."
// included: job IDs such as "study/trial/3/segment/0" have slashes. Request
// bodies must not have fields other than those listed.
//
// An error answer has the body {"error": {"code", "message", "tokens"}}.
// Client turns it into a *ServerError that wraps the error of its code, so
// errors.Is and errors.As work as with any queue.Queue:
//
//	Status  Code          Meaning                                         Wraps
//	400     invalid       an invalid argument or a malformed body         queue.ErrInvalid
//	401     unauthorized  no bearer token, or one Verify refuses          ErrUnauthorized
//	404     not_found     /jobs/{id} of a job that is not in the queue    queue.ErrNotFound
//	404     no_route      no route has the path (check the client's URL)  -
//	405     method        the route takes another method (see Allow)      -
//	409     lease_lost    stale tokens, listed in "tokens"                *queue.LeaseLostError
//	413     too_large     the body is over HandlerOptions.MaxBodyBytes    queue.ErrInvalid
//	503     closed        the served queue is closed                      queue.ErrClosed
//	500     internal      any other failure of the queue                  -
//
// # Long polls
//
// The wait of a lease request is a long poll: the server answers as soon
// as it leased a job, or when the wait ends with an empty list. It caps the
// wait of one request at HandlerOptions.MaxWait (20 seconds by default),
// so that requests stay shorter than the timeouts of http.Server and of
// proxies; Client spends a longer wait in several requests. When the
// client goes away the server stops waiting, and if it had leased jobs for
// it that it could not answer with, it releases them: they are visible
// again at once and the attempt does not count. http.Server.Shutdown waits
// for the long polls under way: close the served queue first (they then
// answer 503 closed at once), or give Shutdown a deadline past MaxWait.
//
// # Authentication
//
// Every request, including one that no route matches, needs the header
// Authorization: Bearer TOKEN, checked by HandlerOptions.Verify before
// anything else; without it the answer is 401 with a WWW-Authenticate
// header. The token is a shared secret: the coordinator makes it
// (crypto/rand.Text makes a good one), and it is given to the workers out
// of band, by the environment or a secret store, never in a job. SharedToken
// checks a single token in constant time. The token travels in clear
// unless the server is behind TLS: serve it over HTTPS or on a private
// network only.
//
// # Limits
//
// A request body over HandlerOptions.MaxBodyBytes (4 MiB by default) is
// refused with 413 and changes nothing. Client retries nothing: a call
// whose request fails in transport returns the error and the caller
// decides, knowing that a call that changes the queue may have been
// applied although its answer was lost.
package httpqueue
