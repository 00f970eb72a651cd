// Package demo runs the whole configpub pipeline end to end on embedded
// defaults, narrating each step: a private PostgreSQL cluster, the
// in-process Distribution registry, fresh keys, a Git policy repository with
// a protected main and reviewed merge commits, compile and plan, publish and
// sign, promote, the Config Server, three runtimes (one per audience), a
// second reviewed release, a rollback, a tampered response the runtime
// rejects, and the publication timeline.
//
// Every step runs the real `configpub` verb as a child process, exactly as a
// user would type it, so the demo doubles as a walkthrough of the CLI.
package demo
