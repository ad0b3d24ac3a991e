//go:build !linux

package load

import "testing"

func benchEpoll(b *testing.B, _ int) { b.Skip("the epoll floor client needs Linux") }
