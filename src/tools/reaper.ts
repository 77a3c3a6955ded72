import { commandEnv, runProcess } from './process.js';

/**
 * The numbers of the prctl and rt_sigprocmask system calls, by Node's `process.arch`. Perl's
 * `syscall` needs them, and the minimal Perl that every Debian system carries (perl-base) has no
 * `syscall.ph` to look them up.
 */
const SYSCALLS: Readonly<Record<string, { prctl: number; rtSigprocmask: number }>> = {
  x64: { prctl: 157, rtSigprocmask: 14 },
  arm64: { prctl: 167, rtSigprocmask: 135 },
  riscv64: { prctl: 167, rtSigprocmask: 135 },
  loong64: { prctl: 167, rtSigprocmask: 135 },
  ia32: { prctl: 172, rtSigprocmask: 175 },
  arm: { prctl: 172, rtSigprocmask: 175 },
  s390x: { prctl: 172, rtSigprocmask: 175 },
  ppc64: { prctl: 171, rtSigprocmask: 174 },
};

const CHECK_TIMEOUT_MS = 10_000;
const MAX_REASON_CHARS = 500;

/**
 * The reaper: a tiny supervisor, in Perl because Perl is on every Debian-based system (perl-base
 * is essential) and can make the one system call Node has no binding for. It makes itself a child
 * subreaper (PR_SET_CHILD_SUBREAPER), so a process below it that calls setsid or is orphaned by a
 * double fork is re-parented to it instead of to init: nothing the command starts can leave its
 * subtree, unless the command kills the reaper itself. It runs the command, which stays in the
 * reaper's process group, and waits. When the command exits, or the reaper gets SIGTERM, SIGINT
 * or SIGHUP (the server's kill of the group, or PR_SET_PDEATHSIG when the server dies), it sends
 * SIGTERM to every process in its subtree (found by walking /proc), SIGKILL to what is left after
 * the grace period, reaps them all, and exits as the command did: same code, or same signal.
 *
 * Arguments: the numbers of the prctl and rt_sigprocmask system calls, the server's pid (if it is
 * already gone, clean up at once), the grace period in ms, and the command.
 *
 * It loads no module (not even strict): `use POSIX` alone cost 10 ms a call, four times what
 * starting Perl and bash costs, so the signal mask is set with the system call itself and WNOHANG
 * is Linux's 1. When the command has exited and the reaper has no child left, nothing can be left
 * below it (an orphan is re-parented to the reaper, the nearest subreaper), so /proc is walked
 * only when something is.
 */
export const REAPER_SCRIPT = String.raw`
my ($prctl, $sigprocmask, $server, $grace_ms, @command) = @ARGV;
syscall($prctl, 36, 1, 0, 0, 0) == 0 or die "toolport reaper: prctl(PR_SET_CHILD_SUBREAPER): $!\n";
syscall($prctl, 1, 15, 0, 0, 0) == 0 or die "toolport reaper: prctl(PR_SET_PDEATHSIG): $!\n";
# SIGHUP, SIGINT and SIGTERM as a kernel sigset_t: one 64-bit word, or two 32-bit ones where Perl has no 64-bit integers.
my $stops = eval { pack('Q', (1 << 0) | (1 << 1) | (1 << 14)) } // pack('L2', (1 << 0) | (1 << 1) | (1 << 14), 0);
sub mask { syscall($sigprocmask, $_[0], $_[1], 0, 8) == 0 or die "toolport reaper: rt_sigprocmask: $!\n"; }
sub block { mask(0, $stops) }
sub unblock { mask(1, $stops) }
block();
my $main = fork();
die "toolport reaper: fork: $!\n" unless defined $main;
if ($main == 0) {
  unblock();
  exec { $command[0] } @command;
  print STDERR "toolport reaper: $command[0]: $!\n";
  exit 127;
}
my $status;
# The handler leaves the wait by dying, but only while the eval below is on the stack. More than
# one signal can come (the server's SIGTERM, then PR_SET_PDEATHSIG; or one PR_SET_PDEATHSIG per
# thread of a multi-threaded server, which hands its children from thread to thread as it dies),
# and Perl blocks a signal while its handler runs: one that comes meanwhile is handled after the
# eval, and dying there would end the reaper before it cleans up. local resets $waiting as the
# eval unwinds, before Perl can run another handler.
our $waiting = 0;
$SIG{$_} = sub { die "stop\n" if $waiting } for qw(TERM INT HUP);
eval {
  local $waiting = 1;
  unblock();
  die "stop\n" if getppid() != $server;
  while (1) {
    my $pid = waitpid(-1, 0);
    last if $pid < 0;
    if ($pid == $main) { $status = $?; last; }
  }
  block();
};
block();
# A signal that comes just as waitpid returns the command's pid interrupts before the assignment;
# waitpid has set $? already, and the command is gone.
$status = $? if !defined $status && !kill(0, $main);

sub now_ms { open(my $fh, '<', '/proc/uptime') or return 0; my ($s) = split / /, scalar <$fh>; return $s * 1000; }
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
my $deadline;
my %termed;
while (1) {
  my $pid;
  # 1 is WNOHANG. -1 (no child at all) means nothing is left below the reaper.
  while (($pid = waitpid(-1, 1)) > 0) { $status = $? if $pid == $main; }
  last if $pid < 0;
  my @left = descendants();
  last unless @left;
  $deadline //= now_ms() + $grace_ms;
  if (now_ms() >= $deadline) { kill 'KILL', @left; }
  else { my @new = grep { !$termed{$_}++ } @left; kill 'TERM', @new if @new; }
  select(undef, undef, undef, 0.01);
}
while ((my $pid = waitpid(-1, 1)) > 0) { $status = $? if $pid == $main; }
$status = 1 << 8 unless defined $status;
if ($status & 127) {
  my $signal = $status & 127;
  $SIG{$_} = 'DEFAULT' for keys %SIG;
  mask(2, pack('x8'));
  kill $signal, $$;
  exit(128 + $signal);
}
exit($status >> 8);
`;

/** The program and arguments that run `file args` under the reaper. */
export function reapedCommand(file: string, args: readonly string[], graceMs: number): { file: string; args: string[] } {
  const syscalls = SYSCALLS[process.arch];
  if (syscalls === undefined) throw new Error(`the reaper does not know the system calls of ${process.arch}`);
  return {
    file: 'perl',
    args: ['-e', REAPER_SCRIPT, '--', String(syscalls.prctl), String(syscalls.rtSigprocmask), String(process.pid), String(graceMs), file, ...args],
  };
}

/**
 * Tries the reaper once. Returns why it cannot work here (not Linux, an architecture it does not
 * know, no perl, prctl refused), or undefined when it works.
 */
export async function reaperUnavailableReason(perl = 'perl'): Promise<string | undefined> {
  if (process.platform !== 'linux') return `child subreapers are a Linux feature and this is ${process.platform}`;
  if (SYSCALLS[process.arch] === undefined) return `the reaper does not know the system calls of ${process.arch}`;
  // The command is perl itself, the one program this needs.
  const { args } = reapedCommand(perl, ['-e', '0'], 0);
  const stderr: Buffer[] = [];
  const outcome = await runProcess(perl, args, {
    cwd: '/',
    env: commandEnv(),
    timeoutMs: CHECK_TIMEOUT_MS,
    onStdout: () => {},
    onStderr: (chunk) => stderr.push(chunk),
  });
  if (outcome.spawnError) {
    return outcome.spawnError.code === 'ENOENT'
      ? `${perl} was not found on PATH; install it (Debian/Ubuntu: apt-get install perl-base)`
      : `${perl} could not be started: ${outcome.spawnError.message}`;
  }
  if (outcome.timedOut) return `a trial run of the reaper did not finish within ${CHECK_TIMEOUT_MS} ms`;
  if (outcome.exitCode === 0) return undefined;
  const message = Buffer.concat(stderr).toString('utf8').trim().slice(0, MAX_REASON_CHARS);
  return `a trial run of the reaper failed${message ? `: ${message}` : ''}`;
}
