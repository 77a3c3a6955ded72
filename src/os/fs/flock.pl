# toolport's lock helper, in Perl because Node has no binding for flock(2) and Perl is on every
# Debian-based system (perl-base is essential), as for the reaper. It loads no module but strict:
# the constants below are Linux's.
#
# Argument: the server's pid. Requests come on stdin, one a line:
#
# - `L <id> <fd>`: open the server's descriptor `<fd>` again, through `/proc/<pid>/fd/<fd>` (the
#   same file or directory, whatever its name leads to now), for reading and writing where it may
#   (NFS grants an exclusive flock only on a file open for writing; opening changes nothing) or
#   else for reading, and take an exclusive flock on it without waiting. Answers `<id> K` (held),
#   `<id> B` (someone else holds it, or a lease would make the open wait) or `<id> E <why>`.
# - `U <id>`: let go of lock `<id>`; no answer.
#
# A lock is held by the helper's open file and dies with it: the helper exits when stdin ends,
# which the kernel does when the server exits or dies, so a lock never outlives its server.
use strict;

# open(2)'s flags, flock(2)'s operations, and the errno of both when they would wait.
sub O_RDONLY () { 0 }
sub O_RDWR () { 2 }
sub O_NONBLOCK () { 2048 }
sub LOCK_EX () { 2 }
sub LOCK_NB () { 4 }
sub EWOULDBLOCK () { 11 }

my $server = shift @ARGV;
my %held;
$| = 1;
while (my $line = <STDIN>) {
  chomp $line;
  my ($op, $id, $fd) = split / /, $line;
  if ($op eq 'U') { delete $held{$id}; next; }
  next unless $op eq 'L' && defined $fd && $fd =~ /^\d+$/;
  my $fh;
  my $path = "/proc/$server/fd/$fd";
  # O_NONBLOCK: an open that would wait (a lease some process holds on the file) fails at once
  # instead of holding this helper, and every lock behind it, for the kernel's lease-break-time.
  if (!sysopen($fh, $path, O_RDWR | O_NONBLOCK) && !sysopen($fh, $path, O_RDONLY | O_NONBLOCK)) {
    print(($! + 0 == EWOULDBLOCK ? "$id B" : "$id E $!") . "\n");
    next;
  }
  if (flock($fh, LOCK_EX | LOCK_NB)) { $held{$id} = $fh; print "$id K\n"; }
  elsif ($! + 0 == EWOULDBLOCK) { print "$id B\n"; }
  else { print "$id E $!\n"; }
}
