//go:build !linux

package load

import "testing"

func benchEpoll(b *testing.B, _ benchPlan) figures {
	b.Skip("the epoll floor client needs Linux")
	return nil
}
