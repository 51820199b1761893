//! A real Slurm cluster on this machine, for the end-to-end tests and the demo.
//!
//! [`Cluster::start`] brings up, in a temporary directory: munged (its own key
//! and socket), a private MariaDB (own datadir, socket and port), slurmdbd,
//! slurmctld and several `slurmd -N nodeN`, each with its own port. Every port
//! is chosen free at start, so two clusters (parallel test binaries, a
//! developer's next to CI) never clash, and nothing system-wide is touched:
//! clients are pointed at the cluster by `SLURM_CONF` ([`Cluster::command`]).
//!
//! Each node gets a fixture root (`tests/fixtures/nodes/healthy` plus an
//! optional overlay) and its own node database. Slurm runs our binaries through
//! small generated wrapper scripts (`<dir>/bin/`): HealthCheckProgram gets no
//! arguments and only `SLURMD_NODENAME` in its environment, so the wrapper
//! adds the config (`LEMONADE_CONFIG`), the node's root (`--root`, with `--use-store`: each simulated node keeps its own database) and the
//! node's extra environment (a fake-NVML scenario), then `exec`s the binary.
//! The config itself picks each node's database with `[[node]]` overrides.
//!
//! Everything is torn down on drop, also when a test panics; a cluster shared
//! by a test binary ([`Cluster::shared`]) is torn down when the process exits.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::slurm_root::SlurmRoot;

/// How to build the cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of slurmd daemons, `node1` .. `nodeN`.
    pub nodes: usize,
    /// `HealthCheckInterval` in seconds; `None` leaves HealthCheckProgram unset.
    pub health_check_interval: Option<u32>,
    /// Nodes whose periodic health check does nothing (the wrapper exits 0):
    /// a fault planted there is found by the prolog, not the periodic run.
    pub no_periodic_check: Vec<String>,
    /// Install `lemonade-prolog` as `Prolog`.
    pub prolog: bool,
    /// Install `lemonade-epilog` as `Epilog`.
    pub epilog: bool,
    /// Fixture overlay per node (`xid-79`, `mount-missing`); others get `healthy`.
    pub fixtures: BTreeMap<String, String>,
    /// Extra environment per node for our programs (a fake-NVML scenario).
    pub node_env: BTreeMap<String, Vec<(String, String)>>,
    /// Environment for every node's programs.
    pub env: Vec<(String, String)>,
    /// Lines of `plugstack.conf` (`PlugStackConfig` is set when not empty).
    /// `{config}` in a line stands for the cluster's `lemonade.toml`, so that
    /// a plugin can be pointed at it before the cluster's directory exists.
    pub plugstack: Vec<String>,
    /// Extra `slurm.conf` lines (`JobRequeue=0`, ...).
    pub slurm_conf_extra: Vec<String>,
    /// Install a `RebootProgram` that "reboots" the node: it restarts that
    /// node's slurmd with `-b` (so slurmctld sees a boot) and, as a repair
    /// would, puts in place the root [`Cluster::set_fixture_after_reboot`]
    /// prepared (without one, the node's fault survives the reboot).
    pub reboot_program: bool,
    /// TOML merged over the generated `lemonade.toml` (the fixture config
    /// plus the cluster's paths), key by key.
    pub lemonade_toml: String,
    /// Where our binaries are (default: [`crate::target_bin_dir`]).
    pub bin_dir: PathBuf,
    /// Another Slurm series to run munge and Slurm from (default: the one
    /// `LEMONADE_SLURM_SERIES` names, else the host's). MariaDB is always
    /// the host's.
    pub slurm_root: Option<SlurmRoot>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            nodes: 4,
            health_check_interval: None,
            no_periodic_check: Vec::new(),
            prolog: false,
            epilog: false,
            fixtures: BTreeMap::new(),
            node_env: BTreeMap::new(),
            env: Vec::new(),
            plugstack: Vec::new(),
            slurm_conf_extra: Vec::new(),
            reboot_program: false,
            lemonade_toml: String::new(),
            bin_dir: crate::target_bin_dir(),
            slurm_root: SlurmRoot::from_env(),
        }
    }
}

/// A running cluster. Dropping it stops every daemon and deletes its directory.
pub struct Cluster {
    dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    nodes: Vec<String>,
    daemons: Mutex<Vec<Daemon>>,
    ports: Ports,
    /// How long bring-up took.
    pub started_in: Duration,
    /// Left running by [`Cluster::keep`]: dropping it stops nothing.
    kept: bool,
    /// Where munge and Slurm come from: the host, or another series' root.
    slurm_root: Option<SlurmRoot>,
}

struct Daemon {
    name: String,
    child: Child,
}

#[derive(Debug, Clone)]
struct Ports {
    mysql: u16,
    dbd: u16,
    ctld: u16,
    slurmd: Vec<u16>,
}

/// Why the cluster could not be started.
#[derive(Debug)]
pub struct StartError(pub String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        StartError(e.to_string())
    }
}

fn find_program(names: &[&str]) -> Result<PathBuf, StartError> {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ] {
        for name in names {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    Err(StartError(format!(
        "none of {names:?} is installed: run scripts/install-deps"
    )))
}

/// Ports our clusters use: below Linux's ephemeral range (32768 and up),
/// so that neither `bind(0)` nor an outgoing connection (srun, sacct, the
/// other clusters a test binary runs at once) takes one between our choice
/// and the daemon's bind, which failed cluster starts now and then.
const PORTS: std::ops::Range<u32> = 20_000..32_000;
/// The next candidate port of this process; starts at a place of its own.
static NEXT_PORT: AtomicU32 = AtomicU32::new(0);

/// `n` distinct TCP ports free on 127.0.0.1, never handed out twice by this
/// process.
fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let span = PORTS.end - PORTS.start;
    let _ = NEXT_PORT.compare_exchange(
        0,
        std::process::id().wrapping_mul(97) % span + 1,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    let mut ports = Vec::with_capacity(n);
    for _ in 0..span {
        if ports.len() == n {
            break;
        }
        let port = (PORTS.start + NEXT_PORT.fetch_add(1, Ordering::SeqCst) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    if ports.len() < n {
        return Err(io::Error::other(format!(
            "fewer than {n} free ports in {PORTS:?} on 127.0.0.1"
        )));
    }
    Ok(ports)
}

static SHARED: OnceLock<Cluster> = OnceLock::new();
/// Process ids and directory of the shared cluster, for the exit hook.
static SHARED_CLEANUP: Mutex<Option<(Vec<u32>, PathBuf)>> = Mutex::new(None);

extern "C" fn cleanup_shared() {
    if let Some(cluster) = SHARED.get() {
        cluster.cancel_all_jobs();
    }
    let taken = SHARED_CLEANUP.lock().ok().and_then(|mut g| g.take());
    if let Some((pids, dir)) = taken {
        stop_pids(&pids);
        stop_rebooted_slurmds(&dir);
        remove_dir_twice(&dir);
    }
}

fn stop_pids(pids: &[u32]) {
    // Each daemon leads a process group of its own (see `spawn`): signalling
    // the group also reaches helpers such as slurmctld's slurmscriptd.
    for pid in pids.iter().rev() {
        // SAFETY: signalling a process group we started.
        unsafe { libc::kill(-(*pid as libc::pid_t), libc::SIGTERM) };
    }
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until
        && pids
            .iter()
            // SAFETY: signal 0 only probes for existence.
            .any(|p| unsafe { libc::kill(*p as libc::pid_t, 0) } == 0 && !is_zombie(*p))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in pids {
        // SAFETY: as above; the group may already be gone.
        unsafe { libc::kill(-(*pid as libc::pid_t), libc::SIGKILL) };
    }
}

/// The slurmds a test reboot started are not our children: their pid files
/// name them.
fn stop_rebooted_slurmds(dir: &Path) {
    if !dir.join("log/reboots").exists() {
        return;
    }
    let pids: Vec<u32> = std::fs::read_dir(dir.join("state"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("slurmd."))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    for pid in pids {
        // SAFETY: signalling a process a test reboot started; it may be gone.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

/// Set by `scripts/test`: the real-Slurm tests must run, never skip.
pub const REQUIRE_ENV: &str = "LEMONADE_REQUIRE_CLUSTER";

/// Why this process cannot start a real Slurm cluster, if it cannot: munged
/// and slurmd need root. `None` whenever [`REQUIRE_ENV`] is set, so that
/// under `scripts/test` a missing root fails the start loudly instead.
pub fn cannot_start() -> Option<&'static str> {
    if std::env::var_os(REQUIRE_ENV).is_some() {
        return None;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    (unsafe { libc::geteuid() } != 0).then_some("munged and slurmd need root")
}

/// Returns from the calling test, saying so on stderr (past the test
/// harness's capture), when [`cannot_start`] says no cluster can start here:
/// a plain `cargo test` as a user passes, and says what it left out.
#[macro_export]
macro_rules! skip_without_cluster {
    () => {
        if let Some(why) = $crate::cluster::cannot_start() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipped {}: {why}; scripts/test runs it as root",
                module_path!()
            );
            return;
        }
    };
}

impl Cluster {
    /// The cluster of this test binary, started on first use with `options()`
    /// and stopped when the process exits.
    pub fn shared(options: impl FnOnce() -> ClusterOptions) -> &'static Cluster {
        SHARED.get_or_init(|| {
            let mut cluster = Cluster::start(options()).unwrap_or_else(|e| panic!("{e}"));
            // A static is never dropped: the exit hook stops the daemons instead.
            let temp = cluster._temp.take().map(|t| t.keep());
            let pids = cluster
                .daemons
                .lock()
                .unwrap()
                .iter()
                .map(|d| d.child.id())
                .collect();
            *SHARED_CLEANUP.lock().unwrap() =
                Some((pids, temp.unwrap_or_else(|| cluster.dir.clone())));
            // SAFETY: registering a plain extern "C" function.
            unsafe { libc::atexit(cleanup_shared) };
            cluster
        })
    }

    /// Brings a cluster up and waits until every node is idle.
    pub fn start(options: ClusterOptions) -> Result<Cluster, StartError> {
        let began = Instant::now();
        let wanted = [
            ("healthcheck", options.health_check_interval.is_some()),
            ("lemonade-prolog", options.prolog),
            ("lemonade-epilog", options.epilog),
        ];
        for (binary, used) in wanted {
            if used && !options.bin_dir.join(binary).is_file() {
                return Err(StartError(format!(
                    "{} missing: run `cargo build --workspace --bins` first",
                    options.bin_dir.join(binary).display()
                )));
            }
        }
        let temp = tempfile::Builder::new()
            .prefix("lemonade-cluster-")
            .tempdir()?;
        let dir = temp.path().to_path_buf();
        // munged insists that every directory above its socket is searchable.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        let nodes: Vec<String> = (1..=options.nodes.max(1))
            .map(|i| format!("node{i}"))
            .collect();
        let ports = free_ports(3 + nodes.len())?;
        let ports = Ports {
            mysql: ports[0],
            dbd: ports[1],
            ctld: ports[2],
            slurmd: ports[3..].to_vec(),
        };
        let mut cluster = Cluster {
            dir: dir.clone(),
            _temp: Some(temp),
            nodes,
            daemons: Mutex::new(Vec::new()),
            ports,
            started_in: Duration::ZERO,
            kept: false,
            slurm_root: options.slurm_root.clone(),
        };
        for sub in [
            "etc", "log", "state", "spool", "bin", "nodes", "db", "munge", "export",
        ] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        std::fs::set_permissions(dir.join("munge"), std::fs::Permissions::from_mode(0o755))?;
        cluster.write_nodes(&options)?;
        cluster.write_wrappers(&options)?;
        cluster.write_lemonade_toml(&options)?;
        cluster.write_slurm_conf(&options)?;
        cluster.start_munge()?;
        cluster.start_mariadb()?;
        cluster.start_slurmdbd()?;
        // Not start_slurmctld(): that waits for nodes, which start below.
        cluster.spawn("slurmctld", cluster.slurm_program(&["slurmctld"])?, &["-D"])?;
        for node in cluster.nodes.clone() {
            cluster.spawn(
                &format!("slurmd-{node}"),
                cluster.slurm_program(&["slurmd"])?,
                &["-D", "-N", &node],
            )?;
        }
        let ok = cluster.wait_until(Duration::from_secs(60), || cluster.all_registered());
        if !ok {
            let log =
                std::fs::read_to_string(cluster.dir.join("log/slurmctld.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            return Err(StartError(format!(
                "slurmd nodes did not register within 60 s; sinfo: {:?}; slurmctld.log ends:\n{}",
                cluster.run("sinfo", &["-N", "-h", "-o", "%N %T %E"]),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        cluster.started_in = began.elapsed();
        Ok(cluster)
    }

    /// Leaves the cluster running (the demo's `--keep`) and returns a shell
    /// script, `<dir>/stop.sh`, that stops it and deletes its directory.
    pub fn keep(mut self) -> PathBuf {
        let daemons = std::mem::take(&mut *self.daemons.lock().unwrap_or_else(|e| e.into_inner()));
        let groups: Vec<String> = daemons
            .iter()
            .rev()
            .map(|d| format!("-{}", d.child.id()))
            .collect();
        let script = self.dir.join("stop.sh");
        let text = format!(
            "#!/bin/sh\n# Stops the Lemonade test cluster in {dir} and deletes it.\n# procps kill: the shell builtin of dash takes no process groups after `--`.\n\
             SLURM_CONF={conf} squeue -h -o %A | xargs -r env SLURM_CONF={conf} scancel -f\n\
             /bin/kill -TERM -- {groups} 2>/dev/null\nsleep 3\n/bin/kill -KILL -- {groups} 2>/dev/null\n\
             rm -rf '{dir}'\n",
            dir = self.dir.display(),
            conf = self.slurm_conf().display(),
            groups = groups.join(" "),
        );
        let _ = std::fs::write(&script, text);
        let _ = std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755));
        if let Some(temp) = self._temp.take() {
            let _ = temp.keep();
        }
        // The daemons outlive this process: their handles are let go unwaited.
        std::mem::forget(daemons);
        self.kept = true;
        script
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Copies the daemons' logs (and `slurm.conf`) to a directory of their
    /// own that outlives the cluster, for a test that fails: the cluster's
    /// directory is deleted when the test binary exits. Returns that directory.
    pub fn save_logs(&self) -> io::Result<PathBuf> {
        let saved = tempfile::Builder::new()
            .prefix("lemonade-cluster-logs-")
            .tempdir()?
            .keep();
        for entry in std::fs::read_dir(self.dir.join("log"))? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), saved.join(entry.file_name()))?;
            }
        }
        std::fs::copy(self.slurm_conf(), saved.join("slurm.conf"))?;
        Ok(saved)
    }

    /// Node names, `node1` ..
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    pub fn slurm_conf(&self) -> PathBuf {
        self.dir.join("etc/slurm.conf")
    }

    /// The `lemonade.toml` every node's programs read.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("etc/lemonade.toml")
    }

    /// A node's fixture root (what its checks read as `/`).
    pub fn node_root(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node)
    }

    /// A node's database.
    pub fn node_db(&self, node: &str) -> PathBuf {
        self.dir.join("db").join(node).join("node.db")
    }

    /// The spool export directory the nodes write to.
    pub fn spool_dir(&self) -> PathBuf {
        self.dir.join("export")
    }

    /// The wrapper of one of our binaries, as Slurm runs it.
    pub fn wrapper(&self, binary: &str) -> PathBuf {
        self.dir.join("bin").join(binary)
    }

    /// The root `node` gets at its next reboot (see [`ClusterOptions::reboot_program`]):
    /// the fixture `fault` (`healthy` for a reboot that repairs).
    pub fn set_fixture_after_reboot(&self, node: &str, fault: &str) -> io::Result<()> {
        let dir = self.dir.join("after-reboot").join(node);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        crate::fixture::compose(fault, &dir)
    }

    /// Writes `bin/reboot`. slurmd runs it with no argument and no node name,
    /// so it finds its slurmd among its ancestors (`slurmd -D -N nodeN`).
    ///
    /// The restart runs in a session of its own, and the program exits only
    /// once it does: slurmd 26.05 runs its RebootProgram in a process group
    /// of its own and kills that group as soon as the program exits (24.11
    /// ran it through `system()`). A restart still in the program's group
    /// then dies with it, under load most of the time, and the node stays
    /// `reboot^` until `ResumeTimeout` ("reboot timed out").
    fn write_reboot_program(&self) -> io::Result<PathBuf> {
        let script = format!(
            r#"#!/bin/sh
# Generated by lemonade_tests::cluster: the test cluster's RebootProgram.
d='{d}'
p=$$
cmd=
while [ "$p" -gt 1 ]; do
    cmd=$(tr '\0' ' ' < /proc/$p/cmdline)
    case "$cmd" in *slurmd*" -N "*) break ;; esac
    p=$(sed 's/.*) [A-Za-z] \([0-9]*\).*/\1/' /proc/$p/stat)
    cmd=
done
[ -n "$cmd" ] || {{ echo "reboot: no slurmd among my ancestors" >&2; exit 1; }}
node=$(echo "$cmd" | sed 's/.* -N \([^ ]*\).*/\1/')
bin=$(echo "$cmd" | cut -d' ' -f1)
ready="$d/state/reboot-$node.$$"
rm -f "$ready"
export d p node bin ready
# slurmd 26.05 kills this program's process group once it exits: the
# restart leaves it (setsid) and says so before this program may exit.
setsid /bin/sh -c '
    : > "$ready"
    gone() {{ [ ! -d /proc/$p ] || grep -q ") Z " /proc/$p/stat 2>/dev/null; }}
    kill -TERM "$p"
    i=0
    until gone || [ $i -ge 600 ]; do sleep 0.05; i=$((i + 1)); done
    gone || {{ kill -KILL "$p"; sleep 1; }}
    if [ -d "$d/after-reboot/$node" ]; then
        rm -rf "$d/nodes/$node"
        mv "$d/after-reboot/$node" "$d/nodes/$node"
    fi
    echo "$(date +%s) $node" >> "$d/log/reboots"
    SLURM_CONF="{conf}" PATH=/usr/sbin:/usr/bin:/sbin:/bin exec "$bin" -D -b -N "$node" >> "$d/log/slurmd-$node.out" 2>&1
' < /dev/null > /dev/null 2>&1 &
i=0
until [ -e "$ready" ] || [ $i -ge 600 ]; do sleep 0.05; i=$((i + 1)); done
[ -e "$ready" ] || {{ echo "reboot: the restart of $node did not start within 30 s" >&2; exit 1; }}
rm -f "$ready"
exit 0
"#,
            d = self.dir.display(),
            conf = self.slurm_conf().display(),
        );
        let path = self.dir.join("bin").join("reboot");
        std::fs::create_dir_all(self.dir.join("bin"))?;
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(path)
    }

    /// How many times the RebootProgram rebooted `node` (restarted its slurmd).
    pub fn reboots(&self, node: &str) -> usize {
        std::fs::read_to_string(self.dir.join("log/reboots"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some(node))
            .count()
    }

    /// Copies the fixture overlay `fault` over a node's root (`healthy` restores it).
    pub fn set_fixture(&self, node: &str, fault: &str) -> io::Result<()> {
        crate::fixture::compose(fault, &self.node_root(node))
    }

    /// The Slurm series this cluster runs (`22.05` for the host's, ...).
    pub fn slurm_series(&self) -> String {
        match &self.slurm_root {
            Some(root) => root.series().to_string(),
            None => host_slurm_series(),
        }
    }

    /// A Slurm client command (`sinfo`, `sbatch`, ...) aimed at this cluster;
    /// in another series' root when the cluster runs one.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = self
            .slurm_program(&[program])
            .unwrap_or_else(|_| Command::new(program));
        self.aim(&mut cmd);
        cmd
    }

    /// One of our binaries (`lemon`, `healthcheck`, a wrapper) run where the
    /// cluster's Slurm commands are, so that the Slurm commands it calls are
    /// the cluster's series; aimed at the cluster like [`Cluster::command`].
    pub fn host_binary(&self, path: &Path) -> Command {
        let mut cmd = match &self.slurm_root {
            Some(root) => root.command(path),
            None => Command::new(path),
        };
        self.aim(&mut cmd);
        cmd
    }

    fn aim(&self, cmd: &mut Command) {
        cmd.env("SLURM_CONF", self.slurm_conf())
            .env("SLURM_TIME_FORMAT", "%s")
            .current_dir(&self.dir)
            .stdin(Stdio::null());
    }

    /// A munge or Slurm program (the first of `names` installed), from the
    /// cluster's series.
    fn slurm_program(&self, names: &[&str]) -> Result<Command, StartError> {
        match &self.slurm_root {
            None => find_program(names).map(Command::new),
            Some(root) => root
                .program(names)
                .map(|p| root.command(&p))
                .ok_or_else(|| {
                    StartError(format!(
                        "none of {names:?} is installed in {} (Slurm {})",
                        root.path().display(),
                        root.series()
                    ))
                }),
        }
    }

    /// Runs a Slurm client command; its stdout, or stderr as the error.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = self
            .command(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "{program} {args:?}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// `(state, reason)` of a node, from `sinfo -h -N -o '%N|%T|%E'`.
    pub fn node_state(&self, node: &str) -> Result<(String, String), String> {
        let out = self.run("sinfo", &["-h", "-N", "-o", "%N|%T|%E", "-n", node])?;
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{node}|")))
            .ok_or_else(|| format!("{node} not in sinfo output {out:?}"))?;
        let mut parts = line.splitn(3, '|');
        parts.next();
        let state = parts.next().unwrap_or("").to_string();
        let reason = parts.next().unwrap_or("").to_string();
        Ok((
            state,
            if reason == "none" {
                String::new()
            } else {
                reason
            },
        ))
    }

    /// Submits a batch job (`sbatch --parsable`); returns its id.
    pub fn sbatch(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["--parsable", "-o", "job-%j.out"];
        all.extend_from_slice(args);
        let out = self.run("sbatch", &all)?;
        Ok(out.trim().split(';').next().unwrap_or("").to_string())
    }

    /// One field of `scontrol show job -o` (`JobState`, `NodeList`,
    /// `Restarts`, ...); empty when the job or the field is unknown.
    pub fn job_field(&self, job: &str, key: &str) -> String {
        let out = self
            .run("scontrol", &["show", "job", "-o", job])
            .unwrap_or_default();
        let prefix = format!("{key}=");
        out.split_whitespace()
            .find_map(|kv| kv.strip_prefix(prefix.as_str()))
            .unwrap_or("")
            .to_string()
    }

    /// Waits until `job` is COMPLETED; true when it is within `limit`. A
    /// requeued job waits out a `BeginTime` of about two minutes: it is told
    /// to start now.
    pub fn wait_job_completed(&self, job: &str, limit: Duration) -> bool {
        self.wait_until(limit, || {
            if self.job_field(job, "Reason") == "BeginTime" {
                let _ = self.run(
                    "scontrol",
                    &["update", &format!("JobId={job}"), "StartTime=now"],
                );
            }
            self.job_field(job, "JobState") == "COMPLETED"
        })
    }

    /// Polls the node's `(state, reason)` until `pred` holds or `limit`
    /// passes: `Ok` with the state that held, `Err` with the last one seen.
    pub fn wait_node(
        &self,
        node: &str,
        limit: Duration,
        pred: impl Fn(&str, &str) -> bool,
    ) -> Result<(String, String), (String, String)> {
        let mut last = (String::new(), String::new());
        let ok = self.wait_until(limit, || {
            if let Ok(s) = self.node_state(node) {
                last = s;
            }
            pred(&last.0, &last.1)
        });
        if ok {
            Ok(last)
        } else {
            Err(last)
        }
    }

    /// Polls `done` every 200 ms until it holds or `limit` passes.
    pub fn wait_until(&self, limit: Duration, mut done: impl FnMut() -> bool) -> bool {
        let until = Instant::now() + limit;
        loop {
            if done() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops slurmctld (scenario: the controller is gone).
    pub fn stop_slurmctld(&self) {
        let mut daemons = self.daemons.lock().unwrap();
        if let Some(pos) = daemons.iter().position(|d| d.name == "slurmctld") {
            let mut d = daemons.remove(pos);
            stop_pids(&[d.child.id()]);
            let _ = d.child.wait();
        }
    }

    /// Starts slurmctld again, keeping its saved state, and waits until it
    /// answers and every node has registered again.
    pub fn start_slurmctld(&self) -> Result<(), StartError> {
        self.spawn("slurmctld", self.slurm_program(&["slurmctld"])?, &["-D"])?;
        // Nodes out of service (ours, an administrator's) may answer late:
        // what matters is that the controller and the nodes in service do.
        let ready = || {
            self.nodes.iter().all(|n| {
                self.node_state(n).is_ok_and(|(s, _)| {
                    s.starts_with("down")
                        || s.starts_with("drain")
                        || (!s.ends_with('*') && !s.starts_with("unk"))
                })
            })
        };
        if self.wait_until(Duration::from_secs(60), ready) {
            Ok(())
        } else {
            Err(StartError(
                "slurmctld or its nodes did not answer within 60 s".into(),
            ))
        }
    }

    /// True when slurmctld answers and knows every node as responding.
    pub fn all_registered(&self) -> bool {
        self.nodes.iter().all(|n| {
            self.node_state(n)
                .map(|(s, _)| !s.ends_with('*') && !s.starts_with("unk"))
                .unwrap_or(false)
        })
    }

    fn spawn(&self, name: &str, mut program: Command, args: &[&str]) -> Result<(), StartError> {
        let log = std::fs::File::create(self.dir.join("log").join(format!("{name}.out")))?;
        let child = program
            .args(args)
            .process_group(0)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("SLURM_CONF", self.slurm_conf())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| StartError(format!("{name}: {e}")))?;
        let pid = child.id();
        self.daemons.lock().unwrap().push(Daemon {
            name: name.to_string(),
            child,
        });
        if let Ok(mut g) = SHARED_CLEANUP.lock() {
            if let Some((pids, _)) = g.as_mut() {
                pids.push(pid);
            }
        }
        Ok(())
    }

    fn write_nodes(&self, options: &ClusterOptions) -> io::Result<()> {
        for node in &self.nodes {
            let root = self.node_root(node);
            std::fs::create_dir_all(&root)?;
            let fault = options.fixtures.get(node).map_or("healthy", String::as_str);
            crate::fixture::compose(fault, &root)?;
            std::fs::create_dir_all(self.dir.join("db").join(node))?;
        }
        Ok(())
    }

    fn write_wrappers(&self, options: &ClusterOptions) -> io::Result<()> {
        for binary in ["healthcheck", "lemonade-prolog", "lemonade-epilog"] {
            let mut s = String::from("#!/bin/sh\n# Generated by lemonade_tests::cluster: Slurm gives our programs\n# no arguments, so the test cluster's config and roots are added here.\n");
            s.push_str(&format!(
                "LEMONADE_CONFIG='{}'\nexport LEMONADE_CONFIG\n",
                self.config_path().display()
            ));
            let healthy = crate::fake_nvml::scenario(crate::fake_nvml::HEALTHY);
            s.push_str(&format!(
                "{}='{}'\nexport {}\n",
                crate::fake_nvml::SCENARIO_ENV,
                healthy.display(),
                crate::fake_nvml::SCENARIO_ENV
            ));
            for (k, v) in &options.env {
                s.push_str(&format!("{k}='{v}'\nexport {k}\n"));
            }
            s.push_str("case \"$SLURMD_NODENAME\" in\n");
            for node in &self.nodes {
                s.push_str(&format!("{node})\n"));
                if binary == "healthcheck" && options.no_periodic_check.contains(node) {
                    s.push_str("  [ $# -eq 0 ] && exit 0\n");
                }
                for (k, v) in options.node_env.get(node).into_iter().flatten() {
                    s.push_str(&format!("  {k}='{v}'; export {k}\n"));
                }
                s.push_str("  ;;\n");
            }
            s.push_str("esac\n");
            s.push_str(&format!(
                "exec '{}' --root '{}'/\"$SLURMD_NODENAME\" --use-store \"$@\"\n",
                options.bin_dir.join(binary).display(),
                self.dir.join("nodes").display()
            ));
            let path = self.wrapper(binary);
            let mut f = std::fs::File::create(&path)?;
            f.write_all(s.as_bytes())?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(())
    }

    fn write_lemonade_toml(&self, options: &ClusterOptions) -> io::Result<()> {
        let fixture = std::fs::read_to_string(crate::fixture::node_config()).unwrap_or_default();
        let mut table: toml::Table = fixture
            .parse()
            .map_err(|e| io::Error::other(format!("fixture config: {e}")))?;
        let generated = format!(
            r#"
[slurm]
bin_dir = "{bin}"
conf = "{conf}"
command_timeout_s = 5

[spool]
dir = "{export}"

[policy]
# Four to six nodes: one node of ours is already 17-25 %.
fleet_breaker_fraction = 0.5

[remediation]
# Only the repair tests' clusters repair (they set a RebootProgram).
enabled = false

[checks.gpu]
# The fake NVML; each node's scenario comes from its wrapper's environment.
library_path = "{nvml}"
"#,
            nvml = crate::fake_nvml::library().display(),
            // As our programs see it: inside the series' root when there is one.
            bin = match &self.slurm_root {
                Some(root) => root.program(&["scontrol"]),
                None => find_program(&["scontrol"]).ok(),
            }
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("/usr/bin"))
            .display(),
            conf = self.slurm_conf().display(),
            export = self.spool_dir().display(),
        );
        merge(&mut table, generated.parse().map_err(io::Error::other)?);
        let mut blocks = Vec::new();
        for node in &self.nodes {
            let mut block = toml::Table::new();
            block.insert("hosts".into(), toml::Value::String(node.clone()));
            let mut store = toml::Table::new();
            store.insert(
                "path".into(),
                toml::Value::String(self.node_db(node).display().to_string()),
            );
            block.insert("store".into(), toml::Value::Table(store));
            blocks.push(toml::Value::Table(block));
        }
        table.insert("node".into(), toml::Value::Array(blocks));
        if !options.lemonade_toml.trim().is_empty() {
            let extra: toml::Table = options
                .lemonade_toml
                .parse()
                .map_err(|e| io::Error::other(format!("lemonade_toml: {e}")))?;
            merge(&mut table, extra);
        }
        std::fs::write(
            self.config_path(),
            toml::to_string(&table).map_err(io::Error::other)?,
        )
    }

    fn write_slurm_conf(&self, options: &ClusterOptions) -> io::Result<()> {
        let d = self.dir.display();
        let host = nix_hostname();
        let sock = self.dir.join("munge/munge.socket");
        let sock = sock.display();
        let mut s = format!(
            "# Generated by lemonade_tests::cluster.
ClusterName=lemonade
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
SlurmdPort={slurmd0}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/state/slurmctld.pid
SlurmdPidFile={d}/state/slurmd.%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
# 1, not 2: a node that we set DOWN must stay down when its slurmd
# re-registers; only nodes that were merely unresponsive come back.
ReturnToService=1
JobRequeue=1
# A job requeued by a failing prolog runs elsewhere instead of being held.
SchedulerParameters=nohold_on_prolog_fail
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={dbd}
# 22.05 takes the munge socket for slurmdbd connections from here.
AccountingStoragePass={sock}
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=10
SlurmdTimeout=30
MessageTimeout=5
MinJobAge=600
",
            ctld = self.ports.ctld,
            slurmd0 = self.ports.slurmd[0],
            dbd = self.ports.dbd,
        );
        if let Some(interval) = options.health_check_interval {
            s.push_str(&format!(
                "HealthCheckProgram={}\nHealthCheckInterval={interval}\nHealthCheckNodeState=ANY\n",
                self.wrapper("healthcheck").display()
            ));
        }
        if options.prolog {
            s.push_str(&format!(
                "Prolog={}\nPrologFlags=Alloc\n",
                self.wrapper("lemonade-prolog").display()
            ));
        }
        if options.epilog {
            s.push_str(&format!(
                "Epilog={}\n",
                self.wrapper("lemonade-epilog").display()
            ));
        }
        if !options.plugstack.is_empty() {
            let path = self.dir.join("etc/plugstack.conf");
            let config = self.config_path().display().to_string();
            let lines: Vec<String> = options
                .plugstack
                .iter()
                .map(|line| line.replace("{config}", &config))
                .collect();
            std::fs::write(&path, lines.join("\n") + "\n")?;
            s.push_str(&format!("PlugStackConfig={}\n", path.display()));
        }
        if options.reboot_program {
            s.push_str(&format!(
                "RebootProgram={}\nResumeTimeout=60\n",
                self.write_reboot_program()?.display()
            ));
        }
        for line in &options.slurm_conf_extra {
            s.push_str(line);
            s.push('\n');
        }
        for (node, port) in self.nodes.iter().zip(&self.ports.slurmd) {
            s.push_str(&format!(
                "NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs=1 RealMemory=500 State=UNKNOWN\n"
            ));
        }
        s.push_str("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
        std::fs::write(self.slurm_conf(), s)?;

        let dbd = format!(
            "AuthType=auth/munge
AuthInfo=socket={sock}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd}
SlurmUser=root
PidFile={d}/state/slurmdbd.pid
LogFile={d}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={mysql}
StorageUser=slurm
StoragePass=lemonade
StorageLoc=slurm_acct_db
",
            dbd = self.ports.dbd,
            mysql = self.ports.mysql,
        );
        let path = self.dir.join("etc/slurmdbd.conf");
        std::fs::write(&path, dbd)?;
        // slurmdbd refuses a config that others can read (it holds a password).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
    }

    fn start_munge(&self) -> Result<(), StartError> {
        let m = self.dir.join("munge");
        let key = m.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| io::Read::read_exact(&mut f, &mut bytes))?;
        std::fs::write(&key, &bytes)?;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))?;
        let arg = |flag: &str, p: &str| format!("--{flag}={}", m.join(p).display());
        let args = [
            "-F".to_string(),
            arg("socket", "munge.socket"),
            arg("key-file", "munge.key"),
            arg("pid-file", "munged.pid"),
            arg("log-file", "munged.log"),
            arg("seed-file", "munged.seed"),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.spawn("munged", self.slurm_program(&["munged"])?, &args)?;
        let socket = m.join("munge.socket");
        if !self.wait_until(Duration::from_secs(10), || socket.exists()) {
            return Err(StartError("munged did not create its socket".into()));
        }
        Ok(())
    }

    fn start_mariadb(&self) -> Result<(), StartError> {
        let data = self.dir.join("mysql");
        let sock = self.dir.join("mysql.sock");
        // Its own temporary directory: the bootstraps of clusters started at
        // once otherwise collide on temporary table names in /tmp
        // ("Unknown table 'mysql.tmp_user_sys'", aborting the start).
        let tmp = self.dir.join("mysql-tmp");
        std::fs::create_dir_all(&tmp)?;
        let install = find_program(&["mariadb-install-db", "mysql_install_db"])?;
        let out = Command::new(&install)
            .env("TMPDIR", &tmp)
            .args([
                "--no-defaults",
                &format!("--datadir={}", data.display()),
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                &format!("--tmpdir={}", tmp.display()),
            ])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(StartError(format!(
                "{}: {}",
                install.display(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let args = [
            "--no-defaults".to_string(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", sock.display()),
            format!("--tmpdir={}", tmp.display()),
            format!("--port={}", self.ports.mysql),
            "--bind-address=127.0.0.1".into(),
            "--user=root".into(),
            format!("--pid-file={}", self.dir.join("mysql.pid").display()),
            format!("--log-error={}", self.dir.join("log/mariadb.log").display()),
            "--skip-log-bin".into(),
            "--innodb-buffer-pool-size=64M".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.spawn(
            "mariadb",
            Command::new(find_program(&["mariadbd", "mysqld"])?),
            &args,
        )?;
        let client = find_program(&["mariadb", "mysql"])?;
        let sql = "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'lemonade'; \
                   GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';";
        let ok = self.wait_until(Duration::from_secs(30), || {
            Command::new(&client)
                .args(["--no-defaults", "-uroot", "-S"])
                .arg(&sock)
                .args(["-e", sql])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        });
        if !ok {
            return Err(StartError("MariaDB did not come up within 30 s".into()));
        }
        Ok(())
    }

    fn start_slurmdbd(&self) -> Result<(), StartError> {
        self.spawn("slurmdbd", self.slurm_program(&["slurmdbd"])?, &["-D"])?;
        // Ready when it listens; sacctmgr would wait seconds per failed try.
        let port = self.ports.dbd;
        if !self.wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        }) {
            return Err(StartError("slurmdbd did not listen within 30 s".into()));
        }
        Ok(())
    }

    /// Jobs still known to slurmctld are cancelled before the daemons stop, so
    /// that no slurmstepd outlives the cluster.
    fn cancel_all_jobs(&self) {
        if let Ok(out) = self.run("squeue", &["-h", "-o", "%A"]) {
            let ids: Vec<&str> = out.split_whitespace().collect();
            if !ids.is_empty() {
                let mut args = vec!["-f"];
                args.extend(ids);
                let _ = self.run("scancel", &args);
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        self.cancel_all_jobs();
        let mut daemons = self.daemons.lock().unwrap_or_else(|e| e.into_inner());
        let pids: Vec<u32> = daemons.iter().map(|d| d.child.id()).collect();
        stop_pids(&pids);
        for d in daemons.iter_mut() {
            let _ = d.child.wait();
        }
        stop_rebooted_slurmds(&self.dir);
        remove_dir_twice(&self.dir);
    }
}

/// A health check that slurmd started just before it was stopped may still
/// create its database directory after the first removal: remove it again.
fn remove_dir_twice(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::fs::remove_dir_all(dir);
}

fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            // `[[node]]` blocks of a test come after the cluster's own (its
            // store paths): appended, they win where they speak.
            (Some(toml::Value::Array(b)), toml::Value::Array(o)) if k == "node" => b.extend(o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn nix_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end])
        .split('.')
        .next()
        .unwrap_or("localhost")
        .to_string()
}

/// The host's Slurm series (`22.05`), from `slurmd -V` (`slurm-wlm 22.05.8`).
fn host_slurm_series() -> String {
    find_program(&["slurmd"])
        .ok()
        .and_then(|p| Command::new(p).arg("-V").output().ok())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .and_then(|v| {
            let version = v.split_whitespace().last()?.to_string();
            let mut parts = version.split('.');
            Some(format!("{}.{}", parts.next()?, parts.next()?))
        })
        .unwrap_or_default()
}
