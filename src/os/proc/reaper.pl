# toolport's reaper, in Perl because Perl is on every Debian-based system (perl-base is essential)
# and can make the system calls Node has no binding for. One long-lived process (the resident)
# takes requests on stdin and forks a call reaper for each; forking a small Perl that is already
# running costs a fraction of starting one (`perl -e` per call was 2 ms, `use POSIX` another 10)
# or of forking the server. It loads no module but strict for the same reason: the constants below
# are Linux's, the signal mask is set with the system call itself.
#
# Each call reaper puts itself in a process group of its own (the server kills the group on
# timeout or abort), makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so a process below
# it that calls setsid or is orphaned by a double fork is re-parented to it instead of to init,
# and connects twice to the server's socket, as the command's stdout and stderr, each connection
# opened with the call's token and `o` or `e`. It runs the command and waits. When the command
# exits, or the call reaper gets SIGTERM, SIGINT or SIGHUP (the server's kill of the group, or
# PR_SET_PDEATHSIG when the resident dies, which it does with the server), it sends SIGTERM to
# every process in its subtree (found by walking /proc, only when it has a child left: an orphan
# is re-parented to it, so no child means nothing below), SIGKILL to what is left after the grace
# period, reaps them all, reports how the command ended, and exits as it did: same code, or same
# signal. Nothing the command starts can leave its subtree, unless the command kills its reaper.
#
# Arguments: the numbers of the prctl, rt_sigprocmask and capset system calls (the server passes
# them by architecture: perl-base has no syscall.ph to look them up), the server's pid (if it is already
# gone, exit at once), and the name of the server's socket in the abstract namespace.
#
# A request is a decimal byte count and a newline, then that many bytes: the call's token, its
# working directory, the grace period in ms, its flags (`i`: the command reads what the server
# sends on fd 3, a third connection opened with the token and `i`), the number of files the call
# reaper writes its pid to before it forks the command (cgroup.procs: the call's cgroups), the
# files, the number of confinement fields, the fields (see `confine` and `watch` below), the
# number of environment entries, the entries (NAME=value) and the command, separated by NUL bytes;
# no command is a trial that runs nothing.
# Each report is one line on stdout, written whole (shorter than PIPE_BUF): `pid TOKEN PID` from
# the resident once it forked the call reaper; `done TOKEN STATUS` from the call reaper when its
# subtree is gone (STATUS is the command's wait status); `error TOKEN MESSAGE` when it could not
# start the command; `exit TOKEN STATUS` from the resident when it reaps a call reaper, which
# matters only when that one was killed before it could report.
use strict;

# prctl(2) options.
sub PR_SET_PDEATHSIG () { 1 }
sub PR_SET_CHILD_SUBREAPER () { 36 }
# Signal numbers, and rt_sigprocmask(2)'s operations on the mask.
sub SIGHUP () { 1 }
sub SIGINT () { 2 }
sub SIGTERM () { 15 }
sub SIG_BLOCK () { 0 }
sub SIG_UNBLOCK () { 1 }
sub SIG_SETMASK () { 2 }
# The size of the kernel's sigset_t (64 signals), which rt_sigprocmask takes as its last argument.
sub SIGSET_BYTES () { 8 }
# waitpid(2)'s flag, an errno, and socket(2)'s domain and type.
sub WNOHANG () { 1 }
sub EINTR () { 4 }
sub AF_UNIX () { 1 }
sub SOCK_STREAM () { 1 }
# The size of sockaddr_un's sun_path.
sub SUN_PATH_BYTES () { 108 }
# A wait status: the signal that ended the process, if any, is in its low 7 bits.
sub SIGNAL_BITS () { 127 }
# The most one read from the server takes.
sub READ_BYTES () { 65536 }
# Landlock's system calls, the same number on every architecture of the unified table (5.1 on).
sub SYS_landlock_create_ruleset () { 444 }
sub SYS_landlock_add_rule () { 445 }
sub SYS_landlock_restrict_self () { 446 }
sub LANDLOCK_CREATE_RULESET_VERSION () { 1 }
sub LANDLOCK_RULE_PATH_BENEATH () { 1 }
sub LANDLOCK_RULE_NET_PORT () { 2 }
# prctl(2) options, and open(2) flags of x86-64 and arm64 (the architectures the server confines on).
sub PR_SET_NO_NEW_PRIVS () { 38 }
sub PR_CAPBSET_DROP () { 24 }
# capset(2)'s header: _LINUX_CAPABILITY_VERSION_3, this process; and the highest capability number to drop.
sub CAPABILITY_VERSION_3 () { 0x20080522 }
sub LAST_CAPABILITY () { 63 }
sub PR_SET_SECCOMP () { 22 }
sub SECCOMP_MODE_FILTER () { 2 }
sub O_PATH () { 010000000 }
sub O_CLOEXEC () { 02000000 }
sub ENOENT () { 2 }
# The auxiliary vector's entry for the page size, in which /proc/PID/stat counts resident memory.
sub AT_PAGESZ () { 6 }

# `supervise` runs one command on the stdio it was given (see the section at the end); else the resident.
my $supervising = @ARGV > 0 && $ARGV[0] eq 'supervise' ? shift @ARGV : undef;
my ($SYS_prctl, $SYS_rt_sigprocmask, $SYS_capset, $server, $address) = @ARGV;
$0 = defined $supervising ? 'toolport-supervisor' : 'toolport-reaper';
syscall($SYS_prctl, PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) == 0 or die "toolport reaper: prctl(PR_SET_PDEATHSIG): $!\n";
exit 0 if getppid() != $server;
my $resident = $$;
# The server's socket: the family, then sun_path whole, a NUL and the name padded with NULs. The
# server binds the padded form on every Node line (Node before 22 pads a name itself, later ones
# bind it as given), and to the kernel a shorter form is another name.
my $server_address = pack('S', AF_UNIX) . pack('a' . SUN_PATH_BYTES, chr(0) . $address);
# SIGHUP, SIGINT and SIGTERM as a kernel sigset_t: one 64-bit word, or two 32-bit ones where Perl has no 64-bit integers.
my $stop_bits = (1 << (SIGHUP - 1)) | (1 << (SIGINT - 1)) | (1 << (SIGTERM - 1));
my $stops = eval { pack('Q', $stop_bits) } // pack('L2', $stop_bits, 0);
# SIGCHLD (17), alone, for the watch.
my $child_exits = eval { pack('Q', 1 << 16) } // pack('L2', 1 << 16, 0);
sub mask { syscall($SYS_rt_sigprocmask, $_[0], $_[1], 0, SIGSET_BYTES) == 0 or die "toolport reaper: rt_sigprocmask: $!\n"; }
our $to_server = \*STDOUT;
sub report { syswrite($to_server, "$_[0]\n"); }
supervise(@ARGV[4 .. $#ARGV]) if defined $supervising;

# A child's exit interrupts select, so the resident reports it at once; the timeout covers one
# that comes just before select starts.
$SIG{CHLD} = sub {};
my %tokens;
my $pending = '';
while (1) {
  while ((my $pid = waitpid(-1, WNOHANG)) > 0) { my $token = delete $tokens{$pid}; report("exit $token $?") if defined $token; }
  my $readable = '';
  vec($readable, fileno(STDIN), 1) = 1;
  next if select($readable, undef, undef, 1) <= 0;
  my $read = sysread(STDIN, $pending, READ_BYTES, length $pending);
  if (!defined $read) { next if $! == EINTR; exit 0; }
  # The server closed its end: it is gone or done with Bash.
  exit 0 if $read == 0;
  while ($pending =~ /\A(\d+)\n/) {
    my ($start, $size) = (length($1) + 1, $1);
    last if length($pending) < $start + $size;
    my ($token, $cwd, $grace_ms, $flags, $joins, @rest) = split /\0/, substr($pending, $start, $size), -1;
    substr($pending, 0, $start + $size, '');
    my @join = splice(@rest, 0, $joins);
    my @confine = splice(@rest, 0, shift @rest);
    my @env = splice(@rest, 0, shift @rest);
    my $pid = fork();
    if (!defined $pid) { report("error $token fork: $!"); next; }
    reap_call($token, $cwd, $grace_ms, $flags, \@join, \@confine, \@env, \@rest) if $pid == 0;
    # Both sides set the group, so it exists before the server can hear of the pid.
    setpgrp($pid, $pid);
    $tokens{$pid} = $token;
    report("pid $token $pid");
  }
}

sub fail { (my $message = $_[1]) =~ tr/\n/ /; report("error $_[0] $message"); exit 127; }

sub reap_call {
  my ($token, $cwd, $grace_ms, $flags, $join, $confine, $env, $command) = @_;
  my @watch = map { /^watch (\d+) (\d+) (\d+) (\d+) (.*)\z/s ? ($1, $2, $3, $4, $5) : () } @$confine;
  $SIG{CHLD} = 'DEFAULT';
  mask(SIG_BLOCK, $stops);
  setpgrp(0, 0);
  syscall($SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 or fail($token, "prctl(PR_SET_CHILD_SUBREAPER): $!");
  syscall($SYS_prctl, PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) == 0 or fail($token, "prctl(PR_SET_PDEATHSIG): $!");
  # The reports go on through a copy that the command does not inherit (Perl marks it close-on-exec).
  open(my $reports, '>&', \*STDOUT) or fail($token, "dup: $!");
  $to_server = $reports;
  for my $file (@$join) {
    my $procs;
    open($procs, '>', $file) && print($procs $$) && close($procs) or fail($token, "could not join the call's cgroup ($file): $!");
  }
  my @streams;
  for my $stream ('o', 'e', ($flags =~ /i/ ? 'i' : ())) {
    socket(my $socket, AF_UNIX, SOCK_STREAM, 0) or fail($token, "socket: $!");
    connect($socket, $server_address) or fail($token, "connect to the server: $!");
    syswrite($socket, $token . $stream) == length($token) + 1 or fail($token, "write to the server: $!");
    push @streams, $socket;
  }
  open(STDIN, '<', '/dev/null') or fail($token, "/dev/null: $!");
  open(STDOUT, '>&', $streams[0]) && open(STDERR, '>&', $streams[1]) or fail($token, "dup: $!");
  my $input = $streams[2];
  close($_) for @streams[0, 1];
  chdir($cwd) or fail($token, "$cwd: $!");
  if (!@$command) { report("done $token 0"); exit 0; }
  my $main = fork();
  fail($token, "fork: $!") unless defined $main;
  if ($main == 0) {
    %ENV = map { split /=/, $_, 2 } @$env;
    if (grep { !/^watch / } @$confine and my $why = confine($confine)) { print STDERR "toolport reaper: $why\n"; exit 126; }
    my $fd3;
    if (defined $input) {
      # fd 3, kept open across exec: the lowest free descriptor once the reports' copy is closed,
      # and not above $^F, so Perl does not mark it close-on-exec.
      close($to_server);
      $^F = 3;
      open($fd3, '<&', $input) && fileno($fd3) == 3 or do { print STDERR "toolport reaper: no fd 3 for the input: $!\n"; exit 127; };
    }
    mask(SIG_UNBLOCK, $stops);
    # In a block of its own: perl -w would warn that the line after it is unlikely to be reached.
    { exec { $command->[0] } @$command };
    print STDERR "toolport reaper: $command->[0]: $!\n";
    exit 127;
  }
  close($input) if defined $input;
  my ($status, $bound) = wait_watched($main, $resident, sub { fail($token, $_[0]) }, @watch);

  # Done only when waitpid finds no child at all: a child that is exiting can be gone from /proc's
  # list (or a zombie there) before waitpid may reap it.
  # A child that is only exiting (bubblewrap's init, orphaned to this reaper as its sandbox ends) is
  # reaped within the first short pause, without walking /proc; the pauses grow to 10 ms.
  # A call over a bound gets no grace: a fork loop would go on forking through it.
  $status = end_subtree($main, $status, $grace_ms, defined $bound ? now_ms() : undef);
  $status = 1 << 8 unless defined $status;
  # The output connections end now, before the report, so the server has all of the output (and
  # their end) as soon as it hears: Perl's own exit can take milliseconds more.
  open(STDOUT, '>', '/dev/null') && open(STDERR, '>', '/dev/null');
  report("done $token $status" . (defined $bound ? " $bound" : ''));
  exit_as($status);
}

# Waits for `main`, the command, until it exits or a signal of $stops comes (the server's kill of
# the group, PR_SET_PDEATHSIG, or `parent` already gone). With `watch` fields (see over_bound) it
# counts the call every interval and stops waiting past a bound. Returns the command's wait
# status (undef when it was not reaped here) and the bound it went past, if any; `fail` says why
# the watch could not start. SIGTERM, SIGINT and SIGHUP are blocked on entry and on return.
sub wait_watched {
  my ($main, $parent, $fail, @watch) = @_;
  my ($status, $bound);
  # The handler leaves the wait by dying, but only while the eval below is on the stack. More than
  # one signal can come (the server's SIGTERM, then PR_SET_PDEATHSIG as the resident dies with the
  # server), and Perl blocks a signal while its handler runs: one that comes meanwhile is handled
  # after the eval, and dying there would end the reaper before it cleans up. local resets
  # $waiting as the eval unwinds, before Perl can run another handler.
  our $waiting = 0;
  # The watch sleeps between its counts; a child's exit wakes it through a pipe of its own, since
  # a SIGCHLD that comes between waitpid and select would not cut the sleep short. SIGCHLD is
  # blocked but around the select: a burst of exits (a fork loop's orphans dying) would otherwise
  # pass the most signals Perl keeps pending (120) and end the reaper. One byte at most is ever
  # unread, so the handler never blocks.
  my ($wake, $woken, $waker) = (undef, 0);
  if (@watch) {
    pipe($wake, $waker) or $fail->("pipe: $!");
    mask(SIG_BLOCK, $child_exits);
    $SIG{CHLD} = sub { syswrite($waker, 'x') unless $woken++ };
  }
  $SIG{$_} = sub { die "stop\n" if $waiting } for qw(TERM INT HUP);
  eval {
    local $waiting = 1;
    mask(SIG_UNBLOCK, $stops);
    die "stop\n" if getppid() != $parent;
    my $counted = 0;
    while (1) {
      my $pid = waitpid(-1, @watch ? WNOHANG : 0);
      last if $pid < 0;
      if ($pid == $main) { $status = $?; last; }
      next if $pid > 0 && !@watch;
      # Counted every interval, also while orphans keep exiting: a fork loop reaps some all the time.
      my $now = now_ms();
      if ($now - $counted >= $watch[0]) {
        $counted = $now;
        last if defined($bound = over_bound(@watch));
      }
      next if $pid > 0;
      my $readable = '';
      vec($readable, fileno($wake), 1) = 1;
      mask(SIG_UNBLOCK, $child_exits);
      my $ready = select($readable, undef, undef, $watch[0] / 1000);
      mask(SIG_BLOCK, $child_exits);
      if ($ready > 0) {
        sysread($wake, my $byte, 1);
        $woken = 0;
      }
    }
    mask(SIG_BLOCK, $stops);
  };
  mask(SIG_BLOCK, $stops);
  # A signal that comes just as waitpid returns the command's pid interrupts before the assignment;
  # waitpid has set $? already, and the command is gone.
  $status = $? if !defined $status && !kill(0, $main);
  if (@watch) {
    $SIG{CHLD} = 'DEFAULT';
    mask(SIG_UNBLOCK, $child_exits);
  }
  return ($status, $bound);
}

# Ends every process below this one: SIGTERM to each (once), SIGKILL to what is left once
# `deadline` (ms, from now_ms; undef: the first found plus `grace_ms`) has passed, reaping them all.
# Returns the wait status of `main` (the command) if it is reaped here, else `status`.
sub end_subtree {
  my ($main, $status, $grace_ms, $deadline) = @_;
  my %termed;
  my $pause = 0.0005;
  my $rounds = 0;
  while (1) {
    my $pid;
    while (($pid = waitpid(-1, WNOHANG)) > 0) { $status = $? if $pid == $main; }
    last if $pid < 0;
    my @left = $rounds++ > 0 ? descendants() : ();
    if (@left) {
      $deadline //= now_ms() + $grace_ms;
      if (now_ms() >= $deadline) { kill 'KILL', @left; }
      else { my @new = grep { !$termed{$_}++ } @left; kill 'TERM', @new if @new; }
    }
    select(undef, undef, undef, $pause);
    $pause = $pause * 2 > 0.01 ? 0.01 : $pause * 2;
  }
  return $status;
}

# Exits as a process with wait status `status` did: the same code, or the same signal.
sub exit_as {
  my ($status) = @_;
  if ($status & SIGNAL_BITS) {
    my $signal = $status & SIGNAL_BITS;
    $SIG{$_} = 'DEFAULT' for keys %SIG;
    mask(SIG_SETMASK, pack('x' . SIGSET_BYTES));
    kill $signal, $$;
    exit(128 + $signal);
  }
  exit($status >> 8);
}

sub now_ms { open(my $fh, '<', '/proc/uptime') or return 0; my ($s) = split / /, scalar <$fh>; return $s * 1000; }

# The call's processes, from each one's list of children: a walk of the call's subtree only,
# where `descendants` reads every process on the machine. Zombies are in the lists.
my $children_files;
sub subtree {
  return descendants() unless $children_files //= -e "/proc/$$/task/$$/children";
  my @found;
  my @queue = ($$);
  while (defined(my $pid = shift @queue)) {
    opendir(my $tasks, "/proc/$pid/task") or next;
    for my $task (grep { /^\d+$/ } readdir $tasks) {
      open(my $fh, '<', "/proc/$pid/task/$task/children") or next;
      my $line = <$fh> // next;
      for my $child (split ' ', $line) { push @found, $child; push @queue, $child; }
    }
  }
  return @found;
}

sub descendants {
  my %children;
  opendir(my $dir, '/proc') or return ();
  for my $pid (grep { /^\d+$/ } readdir $dir) {
    open(my $fh, '<', "/proc/$pid/stat") or next;
    my $stat = <$fh>;
    next unless defined $stat;
    my ($state, $ppid) = split / /, substr($stat, rindex($stat, ')') + 2);
    push @{ $children{$ppid} }, $pid unless $state eq 'Z';
  }
  my @found;
  my @queue = ($$);
  while (@queue) { my $pid = shift @queue; for my $child (@{ $children{$pid} || [] }) { push @found, $child; push @queue, $child; } }
  return @found;
}

# Confines this process and what it runs, for good, from the fields `landlock ABI FS NET SCOPES`,
# `path ACCESS PATH` (Landlock rules), `seccomp HEX` (a BPF program); `watch` is the call reaper's.
# Returns why it could not, or nothing once everything asked for holds: the caller must not run
# the command after a failure.
sub confine {
  my ($fields) = @_;
  my ($ruleset, @filters);
  for my $field (@$fields) {
    my ($kind, $rest) = split / /, $field, 2;
    if ($kind eq 'landlock') {
      my ($abi, $fs, $net, $scoped) = split / /, $rest;
      my $have = syscall(SYS_landlock_create_ruleset, 0, 0, LANDLOCK_CREATE_RULESET_VERSION);
      return "Landlock is not available here: $!" if $have < 0;
      return "Landlock ABI $have is here, and $abi is needed" if $have < $abi;
      my $attr = pack('QQQ', $fs, $net, $scoped);
      $ruleset = syscall(SYS_landlock_create_ruleset, $attr, length $attr, 0);
      return "landlock_create_ruleset: $!" if $ruleset < 0;
    } elsif ($kind eq 'path') {
      my ($access, $path) = split / /, $rest, 2;
      return 'a Landlock rule before its ruleset' unless defined $ruleset;
      # A path gone since the rules were made grants nothing: that is only less access.
      sysopen(my $handle, $path, O_PATH | O_CLOEXEC) or do { next if $! == ENOENT; return "$path: $!" };
      my $attr = pack('Ql', $access, fileno($handle));
      syscall(SYS_landlock_add_rule, $ruleset, LANDLOCK_RULE_PATH_BENEATH, $attr, 0) == 0 or return "landlock_add_rule($path): $!";
      close($handle);
    } elsif ($kind eq 'port') {
      my ($access, $port) = split / /, $rest;
      return 'a Landlock rule before its ruleset' unless defined $ruleset;
      my $attr = pack('QQ', $access, $port);
      syscall(SYS_landlock_add_rule, $ruleset, LANDLOCK_RULE_NET_PORT, $attr, 0) == 0 or return "landlock_add_rule(port $port): $!";
    } elsif ($kind eq 'seccomp') {
      push @filters, pack('H*', $rest);
    } elsif ($kind ne 'watch') {
      return "unknown confinement $kind";
    }
  }
  # Every capability, for good: root's CAP_SYS_PTRACE would let the command read the server's
  # /proc files through Landlock, and CAP_DAC_OVERRIDE the files of other users. Dropping from the
  # bounding set needs CAP_SETPCAP, which an unprivileged server has no use for: it has none.
  syscall($SYS_prctl, PR_CAPBSET_DROP, $_, 0, 0, 0) for 0 .. LAST_CAPABILITY;
  # syscall passes strings by address and may write to them: they must be variables.
  my ($header, $sets) = (pack('Li', CAPABILITY_VERSION_3, 0), pack('L6', (0) x 6));
  syscall($SYS_capset, $header, $sets) == 0 or return "capset: $!";
  syscall($SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 or return "prctl(PR_SET_NO_NEW_PRIVS): $!";
  if (defined $ruleset) {
    syscall(SYS_landlock_restrict_self, $ruleset, 0) == 0 or return "landlock_restrict_self: $!";
    # The ruleset's descriptor is not for the command.
    my $handle;
    close($handle) if open($handle, '<&=', $ruleset);
  }
  for my $filter (@filters) {
    # struct sock_fprog: the count of 8-byte instructions, padding, a pointer to them.
    my $program = pack('S x6 P', length($filter) / 8, $filter);
    syscall($SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, $program, 0, 0) == 0 or return "prctl(PR_SET_SECCOMP): $!";
  }
  return;
}

# The bound the call is over, if any: `watch INTERVAL_MS TASKS BYTES TMP_BYTES TMP_DIR` counts
# the call's processes and threads and their resident memory, from /proc, and the bytes its
# temporary directory holds; 0 switches a count off.
my $page_bytes;
sub over_bound {
  my (undef, $max_tasks, $max_rss, $max_tmp, $tmp) = @_;
  if ($max_tasks > 0 || $max_rss > 0) {
    my ($tasks, $pages) = (0, 0);
    for my $pid (subtree()) {
      open(my $fh, '<', "/proc/$pid/stat") or next;
      my $stat = <$fh> // next;
      my @fields = split / /, substr($stat, rindex($stat, ')') + 2);
      $tasks += $fields[17];
      $pages += $fields[21];
    }
    return 'processes' if $max_tasks > 0 && $tasks > $max_tasks;
    return 'memory' if $max_rss > 0 && $pages * ($page_bytes //= page_bytes()) > $max_rss;
  }
  return 'tmp' if $max_tmp > 0 && tree_bytes($tmp, $max_tmp) > $max_tmp;
  return;
}

sub page_bytes {
  open(my $fh, '<', '/proc/self/auxv') or return 4096;
  local $/;
  my %aux = unpack('Q*', <$fh> // '');
  return $aux{+AT_PAGESZ} || 4096;
}

# The blocks a tree holds, in bytes, walked without following symlinks; stops counting past `stop`.
sub tree_bytes {
  my ($root, $stop) = @_;
  my ($bytes, @dirs) = (0, $root);
  while (defined(my $dir = shift @dirs)) {
    opendir(my $handle, $dir) or next;
    for my $name (readdir $handle) {
      next if $name eq '.' || $name eq '..';
      my @stat = lstat("$dir/$name") or next;
      $bytes += $stat[12] * 512;
      return $bytes if $bytes > $stop;
      push @dirs, "$dir/$name" if -d _;
    }
  }
  return $bytes;
}

# ---------------------------------------------------------------------------------------------
# Supervise: one command on the stdio this process was given (an upstream MCP server's JSON-RPC
# pipes), confined or not, and reaped. Arguments after `supervise` and the three system-call
# numbers: the server's pid (if it is already gone, exit at once), the grace period in ms, the
# number of confinement fields, the fields (see `confine`), `--`, and the command. The supervisor
# makes itself a child subreaper and dies with the server (PR_SET_PDEATHSIG, set above), forks the
# command, which inherits stdin, stdout and stderr and is confined before it starts (a field that
# cannot be applied ends it with 126, fail closed), and waits. With no fields, or only `watch`, the
# command runs with the supervisor's rights, capabilities and all: where the sandbox cannot run,
# the supervisor still holds its lifetime. When the command exits, or the supervisor gets SIGTERM,
# SIGINT or SIGHUP (the server's kill of the group, or the server's death), it ends every process
# below it as a call reaper does (see `end_subtree`), so nothing the command started, setsid and
# double forks included, outlives it; then it exits as the command did. With a `watch` field it
# counts the command's processes, memory and private directory as a call reaper does, and ends it
# past a bound, saying which on stderr. It writes nothing to stdout, which is the command's; its
# own errors go to stderr.
sub supervise {
  my ($grace_ms, $count, @rest) = @_;
  my $fail = sub { print STDERR "toolport supervisor: $_[0]\n"; exit 126; };
  $fail->('usage: supervise PRCTL RT_SIGPROCMASK CAPSET SERVER GRACE_MS COUNT FIELD... -- COMMAND...')
    unless defined $count && $count =~ /^\d+\z/ && $grace_ms =~ /^\d+\z/ && @rest > $count + 1 && $rest[$count] eq '--';
  my @confine = splice(@rest, 0, $count);
  shift @rest;
  my @command = @rest;
  my @watch = map { /^watch (\d+) (\d+) (\d+) (\d+) (.*)\z/s ? ($1, $2, $3, $4, $5) : () } @confine;
  mask(SIG_BLOCK, $stops);
  syscall($SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 or $fail->("prctl(PR_SET_CHILD_SUBREAPER): $!");
  my $main = fork();
  $fail->("fork: $!") unless defined $main;
  if ($main == 0) {
    # A watch alone confines nothing: capabilities and privileges stay as they are (see reap_call).
    if (grep { !/^watch / } @confine and my $why = confine(\@confine)) { $fail->($why); }
    mask(SIG_UNBLOCK, $stops);
    { exec { $command[0] } @command };
    print STDERR "toolport supervisor: $command[0]: $!\n";
    exit 127;
  }
  my ($status, $bound) = wait_watched($main, $server, $fail, @watch);
  # The server reads this line for the reason it restarts the upstream. Past a bound, no grace.
  print STDERR "toolport supervisor: went past its bound of $bound\n" if defined $bound;
  $status = end_subtree($main, $status, $grace_ms, defined $bound ? now_ms() : undef);
  exit_as($status // 1 << 8);
}
