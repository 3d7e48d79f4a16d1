package main

// leaseName is the rollout lease's item beside the rules.
const leaseName = "rollout-lease"
