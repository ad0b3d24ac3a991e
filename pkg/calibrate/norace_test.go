//go:build !race

package calibrate

// raceEnabled is true under the race detector.
const raceEnabled = false
