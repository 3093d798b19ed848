package front

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procInfo is what /proc/PID/stat says of a process.
type procInfo struct {
	pid, ppid, pgid int
}

// readStat reads /proc/PID/stat.
func readStat(pid int) (procInfo, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, pgid: pgid}, true
}

// processTree returns root and its living descendants, root first. (It
// scans /proc: no other interface lists a process's children everywhere.)
func processTree(root int) []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procInfo{}
	var rootInfo procInfo
	found := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readStat(pid)
		if !ok {
			continue
		}
		if pid == root {
			rootInfo, found = p, true
		}
		children[p.ppid] = append(children[p.ppid], p)
	}
	if !found {
		return nil
	}
	tree := []procInfo{rootInfo}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i].pid]...)
	}
	return tree
}

// memory reads a process's resident memory and its peak (VmRSS and VmHWM
// of /proc/PID/status), in bytes.
func memory(pid int) (rss, peak int64) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if key == "VmRSS" {
			rss = kb * 1024
		} else {
			peak = kb * 1024
		}
	}
	return rss, peak
}

// setPdeathsig has the kernel SIGKILL an aws-lambda-rie process when the
// front dies, so that a killed front leaves no emulator behind.
func setPdeathsig(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
