// Package deploy holds the recipes that run didnmf as operators do, and the tests that hold
// them to the binary; it has no code of its own. See README.md here for the steps.
//
//   - ../Dockerfile and docker/entrypoint.sh: a multi-stage image, a static binary on Debian
//     slim, run as a non-root user, `didnmf serve` by default;
//   - kubernetes/didnmf.yaml: a StatefulSet of members with stable names behind a headless
//     Service, the cluster secret and the HTTP certificate from Secrets, readiness on /readyz;
//   - systemd/didnmf.service, didnmf.env.example, didnmf.sysusers: a hardened unit.
//
// deploy_test.go parses each recipe and checks every flag it passes to `didnmf serve`
// against serve's flags (cli.CommandFlags), the ports against those flags, the probes, the
// mounts of the secrets and the sizing; it runs the image's entry point with a stand-in
// binary, and `systemd-analyze verify` on the unit where systemd-analyze is installed.
package deploy
