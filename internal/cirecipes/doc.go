// Package cirecipes keeps the CI recipes in deploy/ci (a GitHub Actions
// workflow and a GitLab job for a self-hosted GPU runner, docs/ci.md) and
// scripts/baseline-keep.sh runnable: its tests lint the workflow with
// actionlint, check the GitLab job's structure, hold both to the README's
// GPU command and docs/outputs.md's files, run the baseline script for real
// and dry-run each recipe's shell steps with a stub go.
package cirecipes
