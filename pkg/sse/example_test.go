package sse_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/sse"
)

func ExampleReader() {
	in := ": keep-alive\r\ndata: {\"a\":1}\r\n\r\nevent: error\ndata: line one\ndata: line two\n\n"
	r := sse.NewReader(strings.NewReader(in), 0)
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println("error:", err) // io.ErrUnexpectedEOF when the stream was cut
			break
		}
		fmt.Printf("type=%q data=%q\n", e.Type, e.Data)
	}
	// Output:
	// type="" data="{\"a\":1}"
	// type="error" data="line one\nline two"
}
