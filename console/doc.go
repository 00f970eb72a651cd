// Package console is the read-only operator console of configpub: server-
// rendered HTML pages (html/template, embedded assets, a little plain
// JavaScript) and a JSON API with the same data over the configpub_viewer
// database role, live updates as server-sent events (RFC 8895's
// text/event-stream as specified by the WHATWG HTML standard) driven by
// PostgreSQL NOTIFY, and Prometheus metrics about publications.
//
// Pages: the environments overview, the publication timeline of an
// environment, a release with its values diff against its base or the
// current release (filtered by audience and host), a target with its
// pointer history, evidence and lease, a target search by identity or
// service ID prefix, and time travel over the pointer-move journal. Access: requests from loopback are served; any
// other request needs a bearer JWT (verified like the Config Server's, in
// operator mode) or a user header set by a configured trusted reverse proxy.
package console
