package main

// The test binary's entry point. It stands in for the fleetbench binary
// and the scripted server in the tests and benchmarks that start
// processes (the integration, e2e and soak tiers), so it is built in
// every tier: the child processes are this same binary.

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asMainEnv makes the test binary run fleetbench's main.
const asMainEnv = "FLEETBENCH_TEST_AS_MAIN"

// noFileEnv, with asMainEnv, sets the process's open-file limits (soft
// and hard) before main runs, as a container runtime's LimitNOFILE would.
const noFileEnv = "FLEETBENCH_TEST_NOFILE"

func TestMain(m *testing.M) {
	if os.Getenv(scriptedEnv) == "1" {
		os.Exit(serveScripted())
	}
	if os.Getenv(asMainEnv) == "1" {
		if n, err := strconv.ParseUint(os.Getenv(noFileEnv), 10, 64); err == nil {
			rl := syscall.Rlimit{Cur: n, Max: n}
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				fmt.Fprintln(os.Stderr, "set open-file limit:", err)
				os.Exit(1)
			}
		}
		profileMain()
		main()
	}
	os.Exit(m.Run())
}

// profileEnv, with asMainEnv, profiles the command's CPU into the file it
// names: FILE,AFTER,FOR (durations), from AFTER past the start for FOR.
const profileEnv = "FLEETBENCH_TEST_CPUPROFILE"

// profileMain starts the CPU profile profileEnv asks for, if any.
func profileMain() {
	spec := strings.Split(os.Getenv(profileEnv), ",")
	if len(spec) != 3 {
		return
	}
	after, err1 := time.ParseDuration(spec[1])
	span, err2 := time.ParseDuration(spec[2])
	if err1 != nil || err2 != nil {
		return
	}
	go func() {
		time.Sleep(after)
		f, err := os.Create(spec[0])
		if err != nil || pprof.StartCPUProfile(f) != nil {
			return
		}
		time.Sleep(span)
		pprof.StopCPUProfile()
		_ = f.Close()
	}()
}
