/*
 * The relay of relay.py as one static binary, for sandboxes whose root has no
 * python3 (a minimal production image, a busybox root):
 *
 *     relay --listen PORT=SOCKET [--listen PORT=SOCKET ...] -- ARGV...
 *
 * Same contract as relay.py: every listener is bound before anything runs
 * (exit 125 and one line on stderr otherwise); the serving process is a
 * grandchild and the original process execs ARGV, keeping its pid, status
 * and signals (127 not found, 126 not executable); the relay exits once the
 * command's process is gone and ignores the signals meant for the command.
 * One single-threaded poll loop serves every connection: no thread and no
 * process per connection, so it costs the sandbox's process cap one pid.
 * It links against nothing at run time (built with cc -static by relaybin.py).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_RELAY 125
#define MAX_LISTEN 16
#define MAX_CONN 64
#define CHUNK 16384
#define POLL_MS 500

struct listener {
    int fd;
    const char *path;
};

struct conn {
    int fd[2]; /* client, upstream; -1 when the slot is free */
    char buf[2][CHUNK]; /* buf[d]: read from fd[d], to be written to fd[1 - d] */
    size_t len[2], off[2];
    int eof[2];
};

static struct listener listeners[MAX_LISTEN];
static int nlisteners;
static struct conn conns[MAX_CONN];

static int fail(const char *what, const char *detail, int code) {
    fprintf(stderr, "relay: %s%s\n", what, detail);
    return code;
}

static int parse_listen(const char *value) {
    const char *eq = strchr(value, '=');
    char *end;
    long port;
    if (eq == NULL || eq == value || eq[1] == '\0')
        return fail("--listen wants PORT=SOCKET, not ", value, -1);
    port = strtol(value, &end, 10);
    if (end != eq || value[0] < '0' || value[0] > '9')
        return fail("--listen wants PORT=SOCKET, not ", value, -1);
    if (port <= 0 || port >= 65536)
        return fail("port out of range in ", value, -1);
    if (strlen(eq + 1) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return fail("socket path too long: ", eq + 1, -1);
    if (nlisteners == MAX_LISTEN)
        return fail("too many --listen options", "", -1);
    for (int i = 0; i < nlisteners; i++) {
        if (listeners[i].fd == (int)port)
            return fail("a port is given twice: ", value, -1);
    }
    /* fd holds the port until the listener is bound. */
    listeners[nlisteners].fd = (int)port;
    listeners[nlisteners].path = eq + 1;
    nlisteners++;
    return 0;
}

static int bind_listener(struct listener *l) {
    struct sockaddr_in addr;
    int one = 1, port = l->fd;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 128) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    l->fd = fd;
    return 0;
}

static void drop(struct conn *c) {
    close(c->fd[0]);
    close(c->fd[1]);
    c->fd[0] = c->fd[1] = -1;
}

static void accept_one(struct listener *l) {
    struct sockaddr_un addr;
    struct linger reset = {1, 0};
    int one = 1, client, upstream, slot = -1;
    for (int i = 0; i < MAX_CONN; i++) {
        if (conns[i].fd[0] < 0) {
            slot = i;
            break;
        }
    }
    if (slot < 0)
        return; /* full: the connection waits in the backlog */
    client = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0)
        return;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    upstream = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, l->path, sizeof addr.sun_path - 1);
    if (upstream < 0 || connect(upstream, (struct sockaddr *)&addr, sizeof addr) < 0) {
        /* Nothing listens there: a reset tells the client at once. */
        setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        close(client);
        if (upstream >= 0)
            close(upstream);
        return;
    }
    fcntl(upstream, F_SETFL, fcntl(upstream, F_GETFL) | O_NONBLOCK);
    memset(conns[slot].len, 0, sizeof conns[slot].len);
    memset(conns[slot].off, 0, sizeof conns[slot].off);
    memset(conns[slot].eof, 0, sizeof conns[slot].eof);
    conns[slot].fd[0] = client;
    conns[slot].fd[1] = upstream;
}

/* Moves what it can for connection c; returns -1 when it is over. */
static int pump(struct conn *c, const short *revents) {
    for (int d = 0; d < 2; d++) {
        if (revents[d] & POLLERR)
            return -1;
        /* Hung up both ways with nothing left to send it: it is gone. */
        if ((revents[d] & POLLHUP) && c->eof[d] && c->len[1 - d] == 0)
            return -1;
        if (c->len[d] == 0 && !c->eof[d] && (revents[d] & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = recv(c->fd[d], c->buf[d], CHUNK, 0);
            if (n == 0) {
                c->eof[d] = 1;
                shutdown(c->fd[1 - d], SHUT_WR);
            } else if (n > 0) {
                c->len[d] = (size_t)n;
                c->off[d] = 0;
            } else if (errno != EAGAIN && errno != EINTR) {
                return -1;
            }
        }
        if (c->len[d] > 0) {
            ssize_t n = send(c->fd[1 - d], c->buf[d] + c->off[d], c->len[d],
                             MSG_NOSIGNAL);
            if (n > 0) {
                c->off[d] += (size_t)n;
                c->len[d] -= (size_t)n;
            } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
                return -1;
            }
        }
    }
    if (c->eof[0] && c->eof[1] && c->len[0] == 0 && c->len[1] == 0)
        return -1;
    return 0;
}

static int command_gone(pid_t pid) {
    char path[64], stat[512];
    ssize_t n;
    int fd;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0)
        return 0;
    stat[n] = '\0';
    char *paren = strrchr(stat, ')');
    return paren != NULL && paren[1] == ' ' && paren[2] == 'Z';
}

static void serve(pid_t command, int pidfd) {
    static struct pollfd fds[1 + MAX_LISTEN + 2 * MAX_CONN];
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        if (devnull > 2)
            close(devnull);
    }
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    for (;;) {
        int n = 0, ready;
        fds[n].fd = pidfd;
        fds[n++].events = POLLIN;
        for (int i = 0; i < nlisteners; i++) {
            fds[n].fd = listeners[i].fd;
            fds[n++].events = POLLIN;
        }
        for (int i = 0; i < MAX_CONN; i++) {
            struct conn *c = &conns[i];
            for (int d = 0; d < 2; d++) {
                short events = 0;
                if (c->fd[0] >= 0) {
                    if (c->len[d] == 0 && !c->eof[d])
                        events |= POLLIN;
                    if (c->len[1 - d] > 0)
                        events |= POLLOUT;
                }
                fds[n].fd = c->fd[0] >= 0 ? c->fd[d] : -1;
                fds[n++].events = events;
            }
        }
        ready = poll(fds, (nfds_t)n, POLL_MS);
        if ((pidfd >= 0 && (fds[0].revents & POLLIN)) || command_gone(command))
            _exit(0);
        if (ready <= 0)
            continue;
        for (int i = 0; i < nlisteners; i++) {
            if (fds[1 + i].revents & POLLIN)
                accept_one(&listeners[i]);
        }
        for (int i = 0; i < MAX_CONN; i++) {
            struct conn *c = &conns[i];
            short revents[2];
            int at = 1 + nlisteners + 2 * i;
            if (c->fd[0] < 0 || fds[at].fd < 0)
                continue;
            revents[0] = fds[at].revents;
            revents[1] = fds[at + 1].revents;
            if ((revents[0] | revents[1]) && pump(c, revents) < 0)
                drop(c);
        }
    }
}

int main(int argc, char **argv) {
    int at = 1, pidfd;
    pid_t command, middle;
    while (at < argc && strcmp(argv[at], "--") != 0) {
        if (strncmp(argv[at], "--listen=", 9) == 0) {
            if (parse_listen(argv[at] + 9) < 0)
                return EXIT_RELAY;
            at += 1;
        } else if (strcmp(argv[at], "--listen") == 0 && at + 1 < argc) {
            if (parse_listen(argv[at + 1]) < 0)
                return EXIT_RELAY;
            at += 2;
        } else {
            return fail("unexpected argument ", argv[at], EXIT_RELAY);
        }
    }
    if (nlisteners == 0)
        return fail("no --listen PORT=SOCKET given", "", EXIT_RELAY);
    if (at + 1 >= argc)
        return fail("no command given after --", "", EXIT_RELAY);
    for (int i = 0; i < nlisteners; i++) {
        char port[16];
        snprintf(port, sizeof port, "%d", listeners[i].fd);
        if (bind_listener(&listeners[i]) < 0) {
            fprintf(stderr, "relay: cannot listen on 127.0.0.1:%s: %s\n", port,
                    strerror(errno));
            return EXIT_RELAY;
        }
    }
    for (int i = 0; i < MAX_CONN; i++)
        conns[i].fd[0] = conns[i].fd[1] = -1;
    command = getpid();
    /* Close-on-exec, and readable once the command's process has exited. */
    pidfd = (int)syscall(SYS_pidfd_open, command, 0);
    fflush(NULL);
    middle = fork();
    if (middle < 0)
        return fail("cannot fork: ", strerror(errno), EXIT_RELAY);
    if (middle == 0) {
        if (fork() == 0)
            serve(command, pidfd);
        _exit(0);
    }
    waitpid(middle, NULL, 0);
    if (pidfd >= 0)
        close(pidfd);
    for (int i = 0; i < nlisteners; i++)
        close(listeners[i].fd);
    execvp(argv[at + 1], argv + at + 1);
    if (errno == ENOENT)
        return fail(argv[at + 1], ": command not found", 127);
    fprintf(stderr, "relay: %s: %s\n", argv[at + 1], strerror(errno));
    return 126;
}
