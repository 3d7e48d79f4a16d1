// Package badbuildtest runs a canary release of a broken gray build with
// real processes, for each way a build breaks, and measures what graylb
// and graylb rollout make of it: the programs of examples/rollout (prod
// and gray instances registered in a real Nacos, a caller sending a steady
// load through graylb's HTTP Transport with outlier detection on and
// serving otelgraylb's metrics), a real Prometheus scraping the caller,
// and the graylb command built from cmd/graylb running `graylb rollout`
// at the judge's defaults.
//
// For each gray build it reports the share of the caller's requests that
// failed from 5 s after the gray build registered, the prod requests that
// reached a gray instance, the rollout's verdict and after how many
// checks. The targets: at most 1 % failed while a working instance of the
// kind or its fall-back (prod) exists, no prod request on gray, every bad
// build rolled back within two checks of gray having enough calls (one
// rolled back on its restarts: of the check that saw its second), every
// healthy build passed.
//
// TestShadowPhase rolls each build out with a shadow phase first (graylb
// rollout --shadow), the caller's requests all unmarked: was a bad build
// stopped in the phase, a healthy one let on, a user request failed?
//
// It is a module of its own, with tests only: it builds the example and
// the command from their modules in this tree and runs them. Both tests
// skip without GRAYLB_NACOS_ADDR (host:port of the server's HTTP port),
// under -race, and outside the repository (a copy fetched from a tag has
// no sources beside it); the tests of how it reads the rollout and judges
// the targets run anywhere. GRAYLB_BADBUILD_PLAN=full runs every build with
// one and with two gray instances (in a shadow phase with one) and the
// healthy build 20 times; the short plan, the default, a few of them.
package badbuildtest
