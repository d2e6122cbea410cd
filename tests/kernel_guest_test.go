package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// This file builds what TestKernel boots: the guest's initramfs (a newc
// cpio archive written here, so no cpio tool is needed) and the command
// lines of the attach-at-boot unit, expanded as systemd would.

// kernelEnv is what booting the guest needs from the host.
type kernelEnv struct {
	qemu    string // qemu-system-x86_64
	kernel  string // /boot/vmlinuz-VERSION
	modules string // /lib/modules/VERSION
	busybox string
	tools   []string // nbd-client, mke2fs, e2fsck: copied with their shared libraries
}

// kernelInstallHint says what to install for the kernel tests.
const kernelInstallHint = "apt-get install -y --no-install-recommends qemu-system-x86 linux-image-cloud-amd64 busybox-static nbd-client e2fsprogs"

// errNoKernelEnv is wrapped by findKernelEnv when something is missing.
var errNoKernelEnv = errors.New("the kernel tests need QEMU, a Linux kernel with its modules, busybox, nbd-client and e2fsprogs")

// guestModules are the modules the guest loads, with their dependencies
// (from modules.dep) loaded first.
var guestModules = []string{"virtio_pci", "virtio_net", "nbd"}

// findKernelEnv looks for the host pieces the guest is made of. The
// kernel is the newest /boot/vmlinuz-* whose modules are installed and
// include nbd.
func findKernelEnv() (*kernelEnv, error) {
	var env kernelEnv
	var missing []string
	look := func(name string, dirs ...string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
		missing = append(missing, name)
		return ""
	}
	sbin := []string{"/usr/sbin", "/sbin", "/bin", "/usr/bin"}
	env.qemu = look("qemu-system-x86_64")
	env.busybox = look("busybox", sbin...)
	for _, n := range []string{"nbd-client", "mke2fs", "e2fsck"} {
		if p := look(n, sbin...); p != "" {
			env.tools = append(env.tools, p)
		}
	}
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	slices.Sort(kernels)
	for i := len(kernels) - 1; i >= 0; i-- {
		ver := strings.TrimPrefix(filepath.Base(kernels[i]), "vmlinuz-")
		mods := filepath.Join("/lib/modules", ver)
		if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err != nil {
			continue
		}
		if _, err := moduleOrder(mods, guestModules); err != nil {
			continue
		}
		env.kernel, env.modules = kernels[i], mods
		break
	}
	if env.kernel == "" {
		missing = append(missing, "a /boot/vmlinuz-* with modules.dep and nbd, virtio_net, virtio_pci modules")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w; missing: %s (%s)", errNoKernelEnv, strings.Join(missing, ", "), kernelInstallHint)
	}
	return &env, nil
}

// moduleOrder returns the module files (relative to dir) that load names,
// dependencies first, each once, as modprobe would order them.
func moduleOrder(dir string, names []string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{} // module file -> its dependencies' files
	byName := map[string]string{} // module name -> file
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		file, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[file] = strings.Fields(rest)
		base := filepath.Base(file)
		name := base[:strings.Index(base, ".ko")]
		byName[strings.ReplaceAll(name, "-", "_")] = file
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var order []string
	seen := map[string]bool{}
	var visit func(file string) error
	visit = func(file string) error {
		if seen[file] {
			return nil
		}
		seen[file] = true
		if !strings.HasSuffix(file, ".ko") {
			return fmt.Errorf("module %s is compressed; busybox insmod loads only plain .ko files", file)
		}
		for _, d := range deps[file] {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, file)
		return nil
	}
	for _, n := range names {
		file, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("module %s not in %s/modules.dep", n, dir)
		}
		if err := visit(file); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// sharedLibs returns the shared libraries (and the dynamic loader) that
// ldd lists for bin; none for a static binary.
func sharedLibs(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", bin, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, w := range strings.Fields(line) {
			if strings.HasPrefix(w, "/") {
				libs = append(libs, w)
				break
			}
		}
	}
	return libs, nil
}

// cpioWriter writes a newc ("070701") cpio archive, the format the kernel
// unpacks as an initramfs.
type cpioWriter struct {
	w    io.Writer
	ino  int
	dirs map[string]bool
	err  error
}

func newCpio(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, dirs: map[string]bool{".": true, "/": true}}
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	name = strings.TrimPrefix(name, "/")
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	var b bytes.Buffer
	b.WriteString(hdr)
	b.WriteString(name)
	b.WriteByte(0)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	_, c.err = c.w.Write(b.Bytes())
}

// dir adds name and its parents as directories, once each.
func (c *cpioWriter) dir(name string) {
	name = filepath.Clean("/" + name)
	if c.dirs[name] {
		return
	}
	c.dir(filepath.Dir(name))
	c.dirs[name] = true
	c.entry(name, 0o040755, nil)
}

// file adds a regular file with its parent directories.
func (c *cpioWriter) file(name string, perm uint32, data []byte) {
	c.dir(filepath.Dir(name))
	c.entry(name, 0o100000|perm, data)
}

// symlink adds name pointing at target.
func (c *cpioWriter) symlink(name, target string) {
	c.dir(filepath.Dir(name))
	c.entry(name, 0o120777, []byte(target))
}

// copyHost adds the host file path at the same path, following symlinks
// for the content but keeping path itself as the name.
func (c *cpioWriter) copyHost(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		return
	}
	c.file(path, uint32(fi.Mode().Perm()), data)
}

func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, nil)
	return c.err
}

// buildInitramfs writes the guest's initramfs to path: busybox, the
// tools with their libraries, the modules in load order, mke2fs.conf, the
// init script and the test's configuration.
func buildInitramfs(env *kernelEnv, path string, initScript, conf []byte) error {
	var buf bytes.Buffer
	c := newCpio(&buf)
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/mnt", "/sbin", "/usr/bin", "/lib/modules"} {
		c.dir(d)
	}
	c.copyHost(env.busybox)
	if env.busybox != "/bin/busybox" {
		c.symlink("/bin/busybox", env.busybox)
	}
	bins := append([]string{env.busybox}, env.tools...)
	libs := map[string]bool{}
	for _, b := range bins {
		l, err := sharedLibs(b)
		if err != nil {
			return err
		}
		for _, p := range l {
			libs[p] = true
		}
	}
	// The tools go to /usr/sbin, where the unit's ExecStart names
	// nbd-client, whatever their path on the host.
	for _, t := range env.tools {
		data, err := os.ReadFile(t)
		if err != nil {
			return err
		}
		c.file("/usr/sbin/"+filepath.Base(t), 0o755, data)
		c.symlink("/sbin/"+filepath.Base(t), "/usr/sbin/"+filepath.Base(t))
	}
	for _, l := range slices.Sorted(func(yield func(string) bool) {
		for l := range libs {
			if !yield(l) {
				return
			}
		}
	}) {
		c.copyHost(l)
	}
	order, err := moduleOrder(env.modules, guestModules)
	if err != nil {
		return err
	}
	var names []string
	for _, m := range order {
		data, err := os.ReadFile(filepath.Join(env.modules, m))
		if err != nil {
			return err
		}
		c.file("/lib/modules/"+filepath.Base(m), 0o644, data)
		names = append(names, filepath.Base(m))
	}
	c.file("/etc/modules.order", 0o644, []byte(strings.Join(names, "\n")+"\n"))
	if _, err := os.Stat("/etc/mke2fs.conf"); err == nil {
		c.copyHost("/etc/mke2fs.conf")
	}
	c.file("/etc/raidd-kernel.conf", 0o644, conf)
	c.file("/init", 0o755, initScript)
	if err := c.close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// unitCommands are the ExecStart and ExecStop command lines of a unit
// instance, expanded.
type unitCommands struct {
	start, stop []string
}

// expandUnit reads a template service unit and returns its ExecStart and
// ExecStop for instance, as systemd would run them: Environment= defaults,
// overridden by envFile (the contents of the unit's EnvironmentFile=, in
// its KEY=VALUE format), the %i/%I/%% specifiers, and ${VAR} (one word) and
// $VAR (split on white space) in the command lines. Anything this does not
// implement (another specifier, a command prefix, several ExecStart lines)
// is an error, so that the unit cannot drift away from what the test runs.
func expandUnit(unit []byte, instance string, envFile string) (unitCommands, error) {
	var uc unitCommands
	env := map[string]string{}
	var start, stop []string
	haveEnvFile := false
	section := ""
	for n, raw := range strings.Split(string(unit), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			section = line
			continue
		}
		if section != "[Service]" {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			return uc, fmt.Errorf("line %d: %q is not KEY=VALUE", n+1, line)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "Environment":
			words, err := splitQuoted(val)
			if err != nil {
				return uc, fmt.Errorf("line %d: %w", n+1, err)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return uc, fmt.Errorf("line %d: Environment %q is not KEY=VALUE", n+1, w)
				}
				env[k] = v
			}
		case "EnvironmentFile":
			haveEnvFile = true
		case "ExecStart", "ExecStop":
			if key == "ExecStart" && start != nil || key == "ExecStop" && stop != nil {
				return uc, fmt.Errorf("line %d: more than one %s", n+1, key)
			}
			spec, err := specifiers(val, instance)
			if err != nil {
				return uc, fmt.Errorf("line %d: %w", n+1, err)
			}
			if key == "ExecStart" {
				start = []string{spec}
			} else {
				stop = []string{spec}
			}
		default:
			if strings.HasPrefix(key, "Exec") {
				return uc, fmt.Errorf("line %d: %s is not run by the test", n+1, key)
			}
		}
	}
	if start == nil || stop == nil {
		return uc, errors.New("the unit needs ExecStart and ExecStop")
	}
	if !haveEnvFile && envFile != "" {
		return uc, errors.New("the unit has no EnvironmentFile=, but the test gives one")
	}
	for n, line := range strings.Split(envFile, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return uc, fmt.Errorf("environment file line %d: %q is not KEY=VALUE", n+1, line)
		}
		env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	var err error
	if uc.start, err = expandCommand(start[0], env); err != nil {
		return uc, fmt.Errorf("ExecStart: %w", err)
	}
	if uc.stop, err = expandCommand(stop[0], env); err != nil {
		return uc, fmt.Errorf("ExecStop: %w", err)
	}
	return uc, nil
}

// specifiers replaces %i, %I and %% with the instance name (an instance
// that needs no escaping) and refuses any other specifier.
func specifiers(s, instance string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("a lone % at the end")
		}
		i++
		switch s[i] {
		case 'i', 'I':
			b.WriteString(instance)
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("specifier %%%c is not implemented by the test", s[i])
		}
	}
	return b.String(), nil
}

// expandCommand splits a command line into words and expands the
// variables in it.
func expandCommand(line string, env map[string]string) ([]string, error) {
	words, err := splitQuoted(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 || !strings.HasPrefix(words[0], "/") {
		return nil, fmt.Errorf("%q: the command must be an absolute path without a prefix (-, @, +, !)", line)
	}
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") {
			out = append(out, strings.Fields(env[w[1:]])...)
			continue
		}
		var b strings.Builder
		for {
			i := strings.Index(w, "${")
			if i < 0 {
				b.WriteString(w)
				break
			}
			j := strings.IndexByte(w[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("%q: unterminated ${", w)
			}
			b.WriteString(w[:i])
			name := w[i+2 : i+j]
			v, ok := env[name]
			if !ok {
				return nil, fmt.Errorf("%q: variable %s is not set", line, name)
			}
			b.WriteString(v)
			w = w[i+j+1:]
		}
		out = append(out, b.String())
	}
	return out, nil
}

// splitQuoted splits s on white space, keeping double- or single-quoted
// words together (with \" and \\ escapes inside double quotes).
func splitQuoted(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '"' || ch == '\'':
			inWord = true
			j := i + 1
			for ; j < len(s) && s[j] != ch; j++ {
				if ch == '"' && s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("%q: unterminated quote", s)
			}
			i = j
		default:
			inWord = true
			cur.WriteByte(ch)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// shellQuote quotes words for a POSIX shell.
func shellQuote(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
