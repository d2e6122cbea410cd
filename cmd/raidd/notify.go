package main

import (
	"net"
	"os"
)

// sdNotify sends state (for example "READY=1") to the service manager when
// raidd runs as a systemd Type=notify service, and does nothing otherwise.
// A leading '@' in NOTIFY_SOCKET names an abstract socket, which the net
// package handles.
func sdNotify(state string) error {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
