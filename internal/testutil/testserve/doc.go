// Package testserve holds the loopback servers and addresses tests of
// several packages share: an OpenAI-style streaming server that checks its
// key, and a free address for a command to listen on. Only tests import it;
// its servers listen on 127.0.0.1 only and never log the key they check.
package testserve
