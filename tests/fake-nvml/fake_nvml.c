/*
 * A fake libnvidia-ml.so.1 for Lemonade's tests.
 *
 * It exports the NVML entry points the GPU checks call and answers from a
 * scenario file (JSON) named by LEMONADE_FAKE_NVML_SCENARIO, read once by
 * nvmlInit_v2. The format is described in README.md next to this file.
 *
 * The JSON is flattened into (path, value) pairs ("gpus.3.uuid" -> "GPU-...");
 * a later pair wins over an earlier one with the same path, so an included
 * base scenario is overridden by the file that includes it. A per-GPU key is looked up under "gpus.<i>." first, then
 * under "defaults.". An absent key answers NVML_ERROR_NOT_SUPPORTED, as a GPU
 * without the feature would. Events (below) then change the counters as the
 * driver does. While the file "then_when" names exists, keys under "then"
 * win (a fault that starts mid-job).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_UNKNOWN = 999,
};

static const struct {
    const char *name;
    nvmlReturn_t code;
} ERRORS[] = {
    {"SUCCESS", NVML_SUCCESS},
    {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
    {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
    {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
    {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
    {"TIMEOUT", NVML_ERROR_TIMEOUT},
    {"CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM},
    {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
    {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
    {"NOT_READY", NVML_ERROR_NOT_READY},
    {"UNKNOWN", NVML_ERROR_UNKNOWN},
};

/* nvml.h's structs, as nvml-wrapper-sys lays them out. */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

/* nvmlGpuFabricInfo_t (v1) and nvmlGpuFabricInfoV_t (v3). */
typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfoV_t;

#define MAX_GPUS 64
struct fake_device {
    unsigned int index;
};
typedef struct fake_device *nvmlDevice_t;
static struct fake_device devices[MAX_GPUS];

/* ---- the flattened scenario ------------------------------------------ */

struct entry {
    char *path;
    char *value; /* NULL for an object or array (present, but not a scalar) */
};
static struct entry *entries;
static size_t n_entries, cap_entries;
static int loaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static void add(const char *path, char *value) {
    if (n_entries == cap_entries) {
        cap_entries = cap_entries ? cap_entries * 2 : 256;
        entries = realloc(entries, cap_entries * sizeof *entries);
        if (!entries) abort();
    }
    entries[n_entries].path = strdup(path);
    entries[n_entries].value = value;
    n_entries++;
}

/*
 * An open-addressing index over the entries, built once the scenario is
 * loaded: the checks make thousands of lookups per run (18 links x 8 GPUs x
 * 5 calls), and a linear scan would make the fake, not the checker, the cost
 * the benchmark measures.
 */
static size_t *slots; /* entry index + 1; 0 is empty */
static size_t n_slots;

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

static void build_index(void) {
    free(slots);
    n_slots = 64;
    while (n_slots < n_entries * 2) n_slots *= 2;
    slots = calloc(n_slots, sizeof *slots);
    if (!slots) abort();
    for (size_t i = 0; i < n_entries; i++) {
        size_t at = hash(entries[i].path) & (n_slots - 1);
        while (slots[at] && strcmp(entries[slots[at] - 1].path, entries[i].path) != 0)
            at = (at + 1) & (n_slots - 1);
        slots[at] = i + 1; /* a later entry for the same path wins */
    }
}

static const struct entry *find(const char *path) {
    if (!slots) return NULL;
    size_t at = hash(path) & (n_slots - 1);
    while (slots[at]) {
        const struct entry *e = &entries[slots[at] - 1];
        if (strcmp(e->path, path) == 0) return e;
        at = (at + 1) & (n_slots - 1);
    }
    return NULL;
}

/* ---- a small JSON reader ---------------------------------------------- */

struct parser {
    const char *s;
    const char *file;
    char dir[4096];
    int failed;
};

static int load_file(const char *file);

static void fail(struct parser *p, const char *what) {
    if (!p->failed)
        fprintf(stderr, "fake-nvml: %s: %s near `%.20s`\n", p->file, what, p->s);
    p->failed = 1;
}

static void ws(struct parser *p) {
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t') p->s++;
}

static char *string(struct parser *p) {
    if (*p->s != '"') {
        fail(p, "expected a string");
        return NULL;
    }
    p->s++;
    size_t n = 0, cap = 64;
    char *out = malloc(cap);
    while (*p->s && *p->s != '"') {
        char c = *p->s++;
        if (c == '\\') {
            c = *p->s++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'u': for (int k = 0; k < 4 && *p->s; k++) p->s++; c = '?'; break;
            case '\0': fail(p, "unterminated string"); free(out); return NULL;
            default: break; /* \" \\ \/ */
            }
        }
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        out[n++] = c;
    }
    if (*p->s != '"') {
        fail(p, "unterminated string");
        free(out);
        return NULL;
    }
    p->s++;
    out[n] = '\0';
    return out;
}

static void value(struct parser *p, const char *path);

static void child(struct parser *p, const char *path, const char *key) {
    size_t n = strlen(path) + strlen(key) + 2;
    char *sub = malloc(n);
    snprintf(sub, n, "%s%s%s", path, *path ? "." : "", key);
    value(p, sub);
    free(sub);
}

static void object(struct parser *p, const char *path) {
    p->s++;
    if (*path) add(path, NULL);
    ws(p);
    if (*p->s == '}') {
        p->s++;
        return;
    }
    while (!p->failed) {
        ws(p);
        char *key = string(p);
        if (!key) return;
        ws(p);
        if (*p->s++ != ':') {
            fail(p, "expected `:`");
            free(key);
            return;
        }
        ws(p);
        if (!*path && strcmp(key, "include") == 0 && *p->s == '"') {
            char *name = string(p);
            char full[8192];
            if (name[0] == '/')
                snprintf(full, sizeof full, "%s", name);
            else
                snprintf(full, sizeof full, "%s/%s", p->dir, name);
            if (load_file(full) != 0) p->failed = 1;
            free(name);
        } else {
            child(p, path, key);
        }
        free(key);
        ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s == '}') {
            p->s++;
            return;
        }
        fail(p, "expected `,` or `}`");
    }
}

static void array(struct parser *p, const char *path) {
    p->s++;
    add(path, NULL);
    ws(p);
    if (*p->s == ']') {
        p->s++;
        return;
    }
    for (unsigned i = 0; !p->failed; i++) {
        char key[16];
        snprintf(key, sizeof key, "%u", i);
        ws(p);
        child(p, path, key);
        ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s == ']') {
            p->s++;
            return;
        }
        fail(p, "expected `,` or `]`");
    }
}

static void value(struct parser *p, const char *path) {
    ws(p);
    if (*p->s == '{') {
        object(p, path);
    } else if (*p->s == '[') {
        array(p, path);
    } else if (*p->s == '"') {
        char *s = string(p);
        if (s) add(path, s);
    } else {
        const char *start = p->s;
        while (*p->s && !strchr(",}] \t\r\n", *p->s)) p->s++;
        size_t n = (size_t)(p->s - start);
        if (n == 0) {
            fail(p, "expected a value");
            return;
        }
        char *lit = strndup(start, n);
        if (strcmp(lit, "true") == 0) {
            strcpy(lit, "1");
        } else if (strcmp(lit, "false") == 0) {
            strcpy(lit, "0");
        } else if (strcmp(lit, "null") == 0) {
            free(lit);
            return; /* null: as if absent */
        }
        add(path, lit);
    }
}

static int load_file(const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "fake-nvml: cannot open scenario %s\n", file);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    text[got] = '\0';

    struct parser p = {.s = text, .file = file, .failed = 0};
    snprintf(p.dir, sizeof p.dir, "%s", file);
    char *slash = strrchr(p.dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(p.dir, ".");
    ws(&p);
    if (*p.s != '{')
        fail(&p, "a scenario is a JSON object");
    else
        value(&p, "");
    free(text);
    return p.failed ? -1 : 0;
}

/* ---- lookups ------------------------------------------------------------ */

/* `key` of GPU `gpu` under `prefix` ("" or "then."): gpus.<i>, then defaults. */
static const struct entry *gpu_find_in(const char *prefix, int gpu, const char *key) {
    char path[512];
    const struct entry *e = NULL;
    if (gpu >= 0) {
        snprintf(path, sizeof path, "%sgpus.%d.%s", prefix, gpu, key);
        e = find(path);
    }
    if (!e) {
        snprintf(path, sizeof path, "%sdefaults.%s", prefix, key);
        e = find(path);
    }
    return e;
}

/*
 * A scenario that changes while a process runs (the node sampler keeps one
 * NVML session for hours): while the file "then_when" names exists, the
 * keys under "then" ("then.defaults", "then.gpus.<i>") win. The file is
 * looked for at every lookup, so a test switches a running sampler's GPUs
 * by creating it, and back by removing it.
 */
static int then_in_force(void) {
    const struct entry *e = find("then_when");
    return e && e->value && access(e->value, F_OK) == 0;
}

static const struct entry *gpu_find(int gpu, const char *key) {
    if (then_in_force()) {
        const struct entry *e = gpu_find_in("then.", gpu, key);
        if (e) return e;
    }
    return gpu_find_in("", gpu, key);
}

/* 0 and the value when the key holds a number, -1 otherwise. */
static int gpu_u64(int gpu, const char *key, unsigned long long *out) {
    const struct entry *e = gpu_find(gpu, key);
    if (!e || !e->value) return -1;
    char *end;
    *out = strtoull(e->value, &end, 0);
    return *end == '\0' ? 0 : -1;
}

static nvmlReturn_t code_of(const char *name) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (strcmp(ERRORS[i].name, name) == 0) return ERRORS[i].code;
    return NVML_ERROR_UNKNOWN;
}

static void block_forever(void) {
    for (;;) pause();
}

/*
 * What every entry point does first: block if the scenario says so, and
 * return the error the scenario plants for this function (and GPU), if any.
 */
static nvmlReturn_t enter(const char *fn, int gpu) {
    if (!loaded) return NVML_ERROR_UNINITIALIZED;
    const struct entry *e = find("block");
    if (e && e->value && strcmp(e->value, fn) == 0) block_forever();
    char key[256];
    snprintf(key, sizeof key, "error.%s", fn);
    if (gpu >= 0) {
        e = gpu_find(gpu, "block");
        if (e && e->value && strcmp(e->value, fn) == 0) block_forever();
        e = gpu_find(gpu, key);
        if (e && e->value) return code_of(e->value);
        e = gpu_find(gpu, "error");
        if (e && e->value) return code_of(e->value);
    }
    e = find(key);
    if (e && e->value) return code_of(e->value);
    return NVML_SUCCESS;
}

static unsigned int gpu_count(void) {
    const struct entry *e = find("gpu_count");
    unsigned long n = e && e->value ? strtoul(e->value, NULL, 0) : 0;
    return n > MAX_GPUS ? MAX_GPUS : (unsigned int)n;
}

static int index_of(nvmlDevice_t d) {
    if (d < devices || d >= devices + MAX_GPUS) return -1;
    return (int)(d - devices);
}

/* The start of every device call: a valid handle, then `enter`. */
#define DEVICE_CALL(fn, d, gpu)                                    \
    int gpu = index_of(d);                                         \
    if (gpu < 0) return NVML_ERROR_INVALID_ARGUMENT;               \
    do {                                                           \
        nvmlReturn_t r_ = enter(fn, gpu);                          \
        if (r_ != NVML_SUCCESS) return r_;                         \
    } while (0)

static nvmlReturn_t read_u64(int gpu, const char *key, unsigned long long *out) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_u64(gpu, key, out) == 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t read_uint(int gpu, const char *key, unsigned int *out) {
    unsigned long long v;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = read_u64(gpu, key, &v);
    if (r == NVML_SUCCESS) *out = (unsigned int)v;
    return r;
}

static nvmlReturn_t read_string(int gpu, const char *key, char *buf, unsigned int len) {
    const struct entry *e = gpu >= 0 ? gpu_find(gpu, key) : find(key);
    if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
    if (!e || !e->value) return NVML_ERROR_NOT_SUPPORTED;
    if (strlen(e->value) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buf, e->value);
    return NVML_SUCCESS;
}

/* ---- the driver's counters: events -------------------------------------- */

/*
 * The scenario gives the counters as a node has them; events change them the
 * way the driver does, so that a test can plant an error and reset a GPU
 * across processes (each healthcheck run loads the library afresh). The
 * scenario's "events" array is applied first, then the lines of the file
 * named by LEMONADE_FAKE_NVML_EVENTS (a reset command appends to it):
 *
 *   ecc-unc <gpu> [n] [dram|sram]   n uncorrectable errors: volatile and
 *                                   aggregate counters both rise; a GPU that
 *                                   remaps rows gets a remap pending, one with
 *                                   page retirement a retirement pending
 *                                   (DRAM only: SRAM has no rows to replace)
 *   ecc-unc-sticky <gpu> [n] [loc]  the same, and again after every reset:
 *                                   memory that keeps failing
 *   reset <gpu>                     volatile counters to 0, aggregate kept,
 *                                   pending remaps and retirements applied
 *   reboot                          a reset of every GPU
 *   recovery <gpu> <action>         the driver's recovery action becomes
 *                                   <action> (NVML field 230); with
 *                                   LEMONADE_FAKE_NVML_KMSG set, the XID 154
 *                                   line that goes with the change
 *
 * A reset clears the actions a reset answers (GPU_RESET, DRAIN_AND_RESET),
 * a reboot every action.
 *
 * A counter the scenario does not have stays unsupported.
 */

static void set_u64(int gpu, const char *key, unsigned long long v) {
    char path[512], *value = malloc(32);
    snprintf(path, sizeof path, "gpus.%d.%s", gpu, key);
    snprintf(value, 32, "%llu", v);
    add(path, value);
    build_index(); /* a later entry wins: the index must see it now */
}

/* Adds n to a counter the GPU has. */
static void bump(int gpu, const char *key, unsigned long long n) {
    unsigned long long v;
    if (gpu_u64(gpu, key, &v) == 0) set_u64(gpu, key, v + n);
}

/* Sets a counter the GPU has. */
static void put(int gpu, const char *key, unsigned long long v) {
    unsigned long long old;
    if (gpu_u64(gpu, key, &old) == 0) set_u64(gpu, key, v);
}

static void ecc_uncorrectable(int gpu, unsigned long long n, const char *location) {
    char key[64];
    for (int agg = 0; agg < 2; agg++) {
        const char *counter = agg ? "agg" : "vol";
        snprintf(key, sizeof key, "ecc_unc_%s_%s", counter, location);
        bump(gpu, key, n);
        snprintf(key, sizeof key, "ecc_unc_%s_total", counter);
        bump(gpu, key, n);
    }
    unsigned long long have;
    if (strcmp(location, "dram") != 0) return; /* only DRAM has rows and pages to replace */
    if (gpu_u64(gpu, "remap_corr", &have) == 0) { /* A100 and later: row remapping */
        bump(gpu, "remap_unc", n);
        put(gpu, "remap_pending", 1);
    }
    if (gpu_u64(gpu, "retired_dbe", &have) == 0) { /* earlier GPUs: page retirement */
        bump(gpu, "retired_dbe", n);
        put(gpu, "retired_pending", 1);
    }
}

#define MAX_STICKY 16
static struct {
    int gpu;
    unsigned long long n;
    char location[8];
} sticky[MAX_STICKY];
static int n_sticky;

/* ---- the recovery action and its XID 154 --------------------------------- */

/* nvml.h's nvmlDeviceGpuRecoveryAction_t, as the driver words it in XID 154. */
static const char *recovery_words(unsigned long long action) {
    static const char *WORDS[] = {"None", "GPU Reset Required", "Node Reboot Required",
                                  "Drain P2P", "Drain and Reset", "Recover IMEX Domain"};
    return action < sizeof WORDS / sizeof WORDS[0] ? WORDS[action] : "Unknown";
}

/* Recovery changes seen so far in this replay: the n-th one is logged with
 * sequence number KMSG_SEQ_BASE + n, and only when the file lacks it, since
 * every process replays every event but the driver logs a change once. */
#define KMSG_SEQ_BASE 900000ULL
static unsigned long long recovery_changes;

static int kmsg_has_seq(FILE *f, unsigned long long seq) {
    char line[512];
    char want[32];
    snprintf(want, sizeof want, ",%llu,", seq);
    rewind(f);
    while (fgets(line, sizeof line, f))
        if (strstr(line, want) == strchr(line, ',')) return 1;
    return 0;
}

/* `NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0
 * (None) to 0x1 (GPU Reset Required)` in kmsg record format. */
static void log_recovery_change(int gpu, unsigned long long from, unsigned long long to) {
    unsigned long long seq = KMSG_SEQ_BASE + ++recovery_changes;
    const char *file = getenv("LEMONADE_FAKE_NVML_KMSG");
    const struct entry *bus = gpu_find(gpu, "bus_id");
    if (!file || !*file || !bus || !bus->value) return;
    FILE *f = fopen(file, "a+");
    if (!f) return;
    unsigned int domain = 0, b = 0, dev = 0;
    sscanf(bus->value, "%x:%x:%x", &domain, &b, &dev);
    if (!kmsg_has_seq(f, seq))
        fprintf(f,
                "3,%llu,%llu,-;NVRM: Xid (PCI:%04x:%02x:%02x): 154, GPU recovery action "
                "changed from 0x%llx (%s) to 0x%llx (%s)\n",
                seq, seq * 1000, domain & 0xffff, b, dev, from, recovery_words(from), to,
                recovery_words(to));
    fclose(f);
}

static void set_recovery(int gpu, unsigned long long to, int logged) {
    unsigned long long from = 0;
    gpu_u64(gpu, "recovery_action", &from);
    if (from == to) return;
    set_u64(gpu, "recovery_action", to);
    if (logged) log_recovery_change(gpu, from, to);
}

static void reset_gpu(int gpu) {
    static const char *LOCATIONS[] = {"l1", "l2", "dram", "rf", "tex", "texshm", "cbu", "sram", "total"};
    char key[64];
    for (size_t i = 0; i < sizeof LOCATIONS / sizeof LOCATIONS[0]; i++) {
        snprintf(key, sizeof key, "ecc_unc_vol_%s", LOCATIONS[i]);
        put(gpu, key, 0);
        snprintf(key, sizeof key, "ecc_cor_vol_%s", LOCATIONS[i]);
        put(gpu, key, 0);
    }
    put(gpu, "remap_pending", 0);
    put(gpu, "retired_pending", 0);
    unsigned long long action;
    if (gpu_u64(gpu, "recovery_action", &action) == 0 && (action == 1 || action == 4))
        set_recovery(gpu, 0, 0);
    for (int i = 0; i < n_sticky; i++)
        if (sticky[i].gpu == gpu) ecc_uncorrectable(gpu, sticky[i].n, sticky[i].location);
}

static void apply_event(const char *line) {
    char verb[32] = "", location[8] = "dram";
    int gpu = -1;
    unsigned long long n = 1;
    int n_read = sscanf(line, "%31s %d %llu %7s", verb, &gpu, &n, location);
    if (n_read < 1) return;
    int in_range = gpu >= 0 && (unsigned)gpu < gpu_count();
    if (strcmp(verb, "reboot") == 0) {
        for (unsigned i = 0; i < gpu_count(); i++) {
            reset_gpu((int)i);
            set_recovery((int)i, 0, 0);
        }
    } else if (strcmp(verb, "recovery") == 0 && in_range && n_read >= 3) {
        set_recovery(gpu, n, 1);
    } else if (strcmp(verb, "reset") == 0 && in_range) {
        reset_gpu(gpu);
    } else if (strcmp(verb, "ecc-unc") == 0 && in_range) {
        ecc_uncorrectable(gpu, n, location);
    } else if (strcmp(verb, "ecc-unc-sticky") == 0 && in_range && n_sticky < MAX_STICKY) {
        sticky[n_sticky].gpu = gpu;
        sticky[n_sticky].n = n;
        snprintf(sticky[n_sticky].location, sizeof sticky[n_sticky].location, "%s", location);
        n_sticky++;
        ecc_uncorrectable(gpu, n, location);
    } else if (*verb && *verb != '#') {
        fprintf(stderr, "fake-nvml: ignored event `%s`\n", line);
    }
}

static void apply_events(void) {
    char key[64];
    for (unsigned i = 0;; i++) {
        snprintf(key, sizeof key, "events.%u", i);
        const struct entry *e = find(key);
        if (!e) break;
        if (e->value) apply_event(e->value);
    }
    const char *file = getenv("LEMONADE_FAKE_NVML_EVENTS");
    FILE *f = file && *file ? fopen(file, "r") : NULL;
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        apply_event(line);
    }
    fclose(f);
}

/* ---- the NVML entry points ---------------------------------------------- */

/* When nvmlInit_v2 loaded the scenario: counters that grow with time count from it. */
static double init_seconds;

static double monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}


EXPORT nvmlReturn_t nvmlInit_v2(void) {
    pthread_mutex_lock(&load_lock);
    if (!loaded) {
        const char *file = getenv("LEMONADE_FAKE_NVML_SCENARIO");
        if (!file || !*file) {
            pthread_mutex_unlock(&load_lock);
            return NVML_ERROR_DRIVER_NOT_LOADED;
        }
        if (load_file(file) != 0) {
            pthread_mutex_unlock(&load_lock);
            return NVML_ERROR_UNKNOWN;
        }
        build_index();
        for (unsigned i = 0; i < MAX_GPUS; i++) devices[i].index = i;
        apply_events();
        init_seconds = monotonic_seconds();
        loaded = 1;
    }
    pthread_mutex_unlock(&load_lock);
    return enter("nvmlInit_v2", -1);
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return nvmlInit_v2();
}

EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == result) return ERRORS[i].name;
    return "UNKNOWN";
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    nvmlReturn_t r = enter("nvmlSystemGetDriverVersion", -1);
    return r ? r : read_string(-1, "driver_version", version, length);
}

/* 12040 for CUDA 12.4, as cuDriverGetVersion gives it. */
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    nvmlReturn_t r = enter("nvmlSystemGetCudaDriverVersion_v2", -1);
    if (r != NVML_SUCCESS) return r;
    if (!version) return NVML_ERROR_INVALID_ARGUMENT;
    const struct entry *e = find("cuda_driver_version");
    if (!e || !e->value) return NVML_ERROR_NOT_SUPPORTED;
    *version = (int)strtol(e->value, NULL, 0);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    nvmlReturn_t r = enter("nvmlDeviceGetCount_v2", -1);
    if (r) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count();
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!loaded) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= gpu_count()) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = enter("nvmlDeviceGetHandleByIndex_v2", (int)index);
    if (r) return r;
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetUUID", d, gpu);
    return read_string(gpu, "uuid", uuid, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    DEVICE_CALL("nvmlDeviceGetPciInfo_v3", d, gpu);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    nvmlReturn_t r = read_string(gpu, "bus_id", pci->busId, sizeof pci->busId);
    if (r) return r;
    sscanf(pci->busId, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", pci->domain & 0xffff,
             pci->bus, pci->device);
    unsigned long long id = 0x233010de; /* H100 SXM5 */
    gpu_u64(gpu, "pci_device_id", &id);
    pci->pciDeviceId = (unsigned int)id;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t d, char *version, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetVbiosVersion", d, gpu);
    return read_string(gpu, "vbios", version, length);
}

/* "NVIDIA H200"; nvml.h: NVML_DEVICE_NAME_V2_BUFFER_SIZE, 96. */
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetName", d, gpu);
    return read_string(gpu, "name", name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t d, char *version) {
    DEVICE_CALL("nvmlDeviceGetGspFirmwareVersion", d, gpu);
    /* nvml.h: NVML_GSP_FIRMWARE_VERSION_BUF_SIZE, 0x40. */
    return read_string(gpu, "gsp_version", version, 0x40);
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode) {
    DEVICE_CALL("nvmlDeviceGetPersistenceMode", d, gpu);
    return read_uint(gpu, "persistence_mode", (unsigned int *)mode);
}

EXPORT nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t d) {
    DEVICE_CALL("nvmlDeviceValidateInforom", d, gpu);
    unsigned long long valid;
    if (gpu_u64(gpu, "inforom_valid", &valid) != 0) return NVML_ERROR_NOT_SUPPORTED;
    return valid ? NVML_SUCCESS : NVML_ERROR_CORRUPTED_INFOROM;
}

static const char *ecc_prefix(int error_type, int counter_type, char *buf, size_t n) {
    snprintf(buf, n, "ecc_%s_%s", error_type ? "unc" : "cor", counter_type ? "agg" : "vol");
    return buf;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t d, int error_type,
                                                    int counter_type, int location,
                                                    unsigned long long *count) {
    static const char *LOCATIONS[] = {"l1", "l2", "dram", "rf", "tex", "texshm", "cbu", "sram"};
    DEVICE_CALL("nvmlDeviceGetMemoryErrorCounter", d, gpu);
    if (location < 0 || location > 7) return NVML_ERROR_INVALID_ARGUMENT;
    char prefix[32], key[64];
    snprintf(key, sizeof key, "%s_%s", ecc_prefix(error_type, counter_type, prefix, sizeof prefix),
             LOCATIONS[location]);
    return read_u64(gpu, key, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error_type, int counter_type,
                                                unsigned long long *count) {
    DEVICE_CALL("nvmlDeviceGetTotalEccErrors", d, gpu);
    char prefix[32], key[64];
    snprintf(key, sizeof key, "%s_total", ecc_prefix(error_type, counter_type, prefix, sizeof prefix));
    return read_u64(gpu, key, count);
}

static nvmlReturn_t retired(int gpu, int cause, unsigned int *count, unsigned long long *addresses,
                            unsigned long long *timestamps) {
    unsigned long long n;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_u64(gpu, cause ? "retired_dbe" : "retired_sbe", &n) != 0) return NVML_ERROR_NOT_SUPPORTED;
    if (*count < n || !addresses) {
        *count = (unsigned int)n;
        return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned long long i = 0; i < n; i++) {
        addresses[i] = 0x1000 * (i + 1);
        if (timestamps) timestamps[i] = 1700000000ULL + i;
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int *count,
                                              unsigned long long *addresses) {
    DEVICE_CALL("nvmlDeviceGetRetiredPages", d, gpu);
    return retired(gpu, cause, count, addresses, NULL);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t d, int cause, unsigned int *count,
                                                 unsigned long long *addresses,
                                                 unsigned long long *timestamps) {
    DEVICE_CALL("nvmlDeviceGetRetiredPages_v2", d, gpu);
    return retired(gpu, cause, count, addresses, timestamps);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending) {
    DEVICE_CALL("nvmlDeviceGetRetiredPagesPendingStatus", d, gpu);
    return read_uint(gpu, "retired_pending", (unsigned int *)pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corrected,
                                              unsigned int *uncorrected, unsigned int *pending,
                                              unsigned int *failure) {
    DEVICE_CALL("nvmlDeviceGetRemappedRows", d, gpu);
    nvmlReturn_t r = read_uint(gpu, "remap_corr", corrected);
    if (r) return r;
    if (read_uint(gpu, "remap_unc", uncorrected)) *uncorrected = 0;
    if (read_uint(gpu, "remap_pending", pending)) *pending = 0;
    if (read_uint(gpu, "remap_failure", failure)) *failure = 0;
    return NVML_SUCCESS;
}

/* Links 0..nvlink_count-1 exist; the others are an invalid argument, as NVML answers. */
static nvmlReturn_t link_exists(int gpu, unsigned int link) {
    unsigned long long count;
    if (gpu_u64(gpu, "nvlink_count", &count) != 0) return NVML_ERROR_NOT_SUPPORTED;
    return link < count ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *active) {
    DEVICE_CALL("nvmlDeviceGetNvLinkState", d, gpu);
    nvmlReturn_t r = link_exists(gpu, link);
    if (r) return r;
    if (!active) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long mask = 0;
    gpu_u64(gpu, "nvlink_inactive_mask", &mask);
    *active = (mask >> link) & 1 ? 0 : 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned int link, int counter,
                                                    unsigned long long *value) {
    static const char *COUNTERS[] = {"replay", "recovery", "crc_flit", "crc_data"};
    DEVICE_CALL("nvmlDeviceGetNvLinkErrorCounter", d, gpu);
    nvmlReturn_t r = link_exists(gpu, link);
    if (r) return r;
    if (counter < 0 || counter > 3) return NVML_ERROR_INVALID_ARGUMENT;
    char key[64];
    snprintf(key, sizeof key, "nvlink%u_%s", link, COUNTERS[counter]);
    if (gpu_u64(gpu, key, value) == 0) return NVML_SUCCESS;
    snprintf(key, sizeof key, "nvlink_%s", COUNTERS[counter]);
    return read_u64(gpu, key, value);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) {
    DEVICE_CALL("nvmlDeviceGetCurrPcieLinkGeneration", d, gpu);
    return read_uint(gpu, "pcie_gen", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) {
    DEVICE_CALL("nvmlDeviceGetMaxPcieLinkGeneration", d, gpu);
    return read_uint(gpu, "pcie_gen_max", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) {
    DEVICE_CALL("nvmlDeviceGetCurrPcieLinkWidth", d, gpu);
    return read_uint(gpu, "pcie_width", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) {
    DEVICE_CALL("nvmlDeviceGetMaxPcieLinkWidth", d, gpu);
    return read_uint(gpu, "pcie_width_max", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned int *v) {
    DEVICE_CALL("nvmlDeviceGetPcieReplayCounter", d, gpu);
    return read_uint(gpu, "pcie_replay", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
                                                              unsigned long long *reasons) {
    DEVICE_CALL("nvmlDeviceGetCurrentClocksThrottleReasons", d, gpu);
    return read_u64(gpu, "clock_reasons", reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
                                                           unsigned long long *reasons) {
    DEVICE_CALL("nvmlDeviceGetCurrentClocksEventReasons", d, gpu);
    return read_u64(gpu, "clock_reasons", reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
    DEVICE_CALL("nvmlDeviceGetTemperature", d, gpu);
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    return read_uint(gpu, "temperature", temp);
}

/* The node sampler's gauges (issue 33). nvml.h: nvmlUtilization_t is
 * {gpu, memory} percent; NVML_CLOCK_SM = 1; NVML_PCIE_UTIL_TX_BYTES = 0,
 * _RX_BYTES = 1, in KB/s. Keys: util_gpu, util_mem, power_mw, sm_clock_mhz,
 * pcie_tx_kbps, pcie_rx_kbps; absent keys answer NOT_SUPPORTED. */
typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    DEVICE_CALL("nvmlDeviceGetUtilizationRates", d, gpu);
    if (!u) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = read_uint(gpu, "util_gpu", &u->gpu);
    return r ? r : read_uint(gpu, "util_mem", &u->memory);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *milliwatts) {
    DEVICE_CALL("nvmlDeviceGetPowerUsage", d, gpu);
    return read_uint(gpu, "power_mw", milliwatts);
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEVICE_CALL("nvmlDeviceGetClockInfo", d, gpu);
    return type == 1 ? read_uint(gpu, "sm_clock_mhz", mhz) : NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned int *kbps) {
    DEVICE_CALL("nvmlDeviceGetPcieThroughput", d, gpu);
    if (counter == 0) return read_uint(gpu, "pcie_tx_kbps", kbps);
    if (counter == 1) return read_uint(gpu, "pcie_rx_kbps", kbps);
    return NVML_ERROR_INVALID_ARGUMENT;
}

/* nvmlFieldValue_t, as nvml-wrapper-sys lays it out; the value a union of
 * 8 bytes. Answered: the recovery action (230) and the C2C fields (below),
 * and NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX (138):
 * `nvlink_tx_kib` plus `nvlink_tx_kibps` for every second since nvmlInit,
 * a counter that grows as a busy link's does (an unsigned long long, type
 * 3). Other fields answer NOT_SUPPORTED in their own nvmlReturn. */
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    unsigned int valueType;
    nvmlReturn_t nvmlReturn;
    unsigned long long value;
} nvmlFieldValue_t;

/* NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: `recovery_action`, a number (an
 * unsigned int, type 1), or an error's name for the value's own return code
 * (a driver that has the call but not the field); absent: NOT_SUPPORTED. */
static void recovery_field(int gpu, nvmlFieldValue_t *v) {
    unsigned long long action;
    const struct entry *e = gpu_find(gpu, "recovery_action");
    if (!e || !e->value) return;
    if (gpu_u64(gpu, "recovery_action", &action) != 0) {
        v->nvmlReturn = code_of(e->value);
        return;
    }
    v->valueType = 1;
    v->value = action & 0xffffffffULL;
    v->nvmlReturn = NVML_SUCCESS;
}

/* The Grace C2C fields (nvml.h, NVML_FI_DEV_C2C_LINK_*): 170 the link
 * count (`c2c_link_count`), per link (scopeId) 171 the status
 * (`c2c_link_status`, 1 active, 0 inactive) and the error counters 231
 * `c2c_error_intr` (CRC), 232 `c2c_error_replay`, 233 `c2c_error_replay_b2b`.
 * A link's own key `<key>.<link>` wins over `<key>`; a number, or an error's
 * name for the value's own return code; absent: NOT_SUPPORTED (no C2C).
 * The count and status are unsigned ints (type 1), the counters unsigned
 * long longs (type 3). */
static void c2c_field(int gpu, nvmlFieldValue_t *v) {
    const char *key;
    switch (v->fieldId) {
    case 170: key = "c2c_link_count"; break;
    case 171: key = "c2c_link_status"; break;
    case 231: key = "c2c_error_intr"; break;
    case 232: key = "c2c_error_replay"; break;
    case 233: key = "c2c_error_replay_b2b"; break;
    default: return;
    }
    char path[96];
    const struct entry *e = NULL;
    snprintf(path, sizeof path, "%s.%u", key, v->scopeId);
    if (v->fieldId != 170) e = gpu_find(gpu, path);
    if (!e) e = gpu_find(gpu, key);
    if (e && !e->value) {
        /* The GPU names other links only: the default answers this one. */
        snprintf(path, sizeof path, "defaults.%s", key);
        e = find(path);
    }
    if (!e || !e->value) return;
    char *end;
    unsigned long long n = strtoull(e->value, &end, 0);
    if (*end != '\0' || end == e->value) {
        v->nvmlReturn = code_of(e->value);
        return;
    }
    v->valueType = v->fieldId <= 171 ? 1 : 3;
    v->value = v->valueType == 1 ? (n & 0xffffffffULL) : n;
    v->nvmlReturn = NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    DEVICE_CALL("nvmlDeviceGetFieldValues", d, gpu);
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        unsigned long long start, per_s = 0;
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        if (v->fieldId == 230) {
            recovery_field(gpu, v);
            continue;
        }
        if (v->fieldId == 170 || v->fieldId == 171 || (v->fieldId >= 231 && v->fieldId <= 233)) {
            c2c_field(gpu, v);
            continue;
        }
        if (v->fieldId != 138 || gpu_u64(gpu, "nvlink_tx_kib", &start) != 0) continue;
        gpu_u64(gpu, "nvlink_tx_kibps", &per_s);
        v->valueType = 3;
        v->value = start + (unsigned long long)(per_s * (monotonic_seconds() - init_seconds));
        v->nvmlReturn = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
}

/* nvml.h: NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0, _SLOWDOWN = 1. */
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int type,
                                                      unsigned int *temp) {
    DEVICE_CALL("nvmlDeviceGetTemperatureThreshold", d, gpu);
    if (type == 0) return read_uint(gpu, "temp_shutdown", temp);
    if (type == 1) return read_uint(gpu, "temp_slowdown", temp);
    return NVML_ERROR_NOT_SUPPORTED;
}

/* `fabric_cluster_uuid`: 32 hex digits, dashes anywhere; absent or not
 * hex: all zero, as a GPU outside a multi-node NVLink domain reports. */
static void cluster_uuid(int gpu, unsigned char uuid[16]) {
    memset(uuid, 0, 16);
    const struct entry *e = gpu_find(gpu, "fabric_cluster_uuid");
    unsigned char parsed[16] = {0};
    int digits = 0;
    for (const char *p = e && e->value ? e->value : ""; *p; p++) {
        if (*p == '-') continue;
        int v = isdigit((unsigned char)*p) ? *p - '0'
              : isxdigit((unsigned char)*p) ? (tolower((unsigned char)*p) - 'a' + 10) : -1;
        if (v < 0 || digits == 32) return;
        parsed[digits / 2] |= (unsigned char)(digits % 2 ? v : v << 4);
        digits++;
    }
    if (digits == 32) memcpy(uuid, parsed, 16);
}

/* The fabric state (0..3: not supported, not started, in progress, completed)
 * and its status (an NVML return code by name); no `fabric_state`: the GPU is
 * not on an NVSwitch fabric. */
static nvmlReturn_t fabric(int gpu, unsigned char *state, nvmlReturn_t *status,
                           unsigned int *clique, unsigned char uuid[16]) {
    unsigned long long v;
    if (gpu_u64(gpu, "fabric_state", &v)) return NVML_ERROR_NOT_SUPPORTED;
    *state = (unsigned char)v;
    const struct entry *e = gpu_find(gpu, "fabric_status");
    *status = e && e->value ? code_of(e->value) : NVML_SUCCESS;
    *clique = gpu_u64(gpu, "fabric_clique", &v) ? 0 : (unsigned int)v;
    cluster_uuid(gpu, uuid);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, nvmlGpuFabricInfo_t *info) {
    DEVICE_CALL("nvmlDeviceGetGpuFabricInfo", d, gpu);
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    return fabric(gpu, &info->state, &info->status, &info->cliqueId, info->clusterUuid);
}

/* The fabric struct versions a driver branch serves: `driver_branch` "R570"
 * knows v1 and v2 (v2 has healthMask) and answers a v3 request with
 * NVML_ERROR_ARGUMENT_VERSION_MISMATCH (25), as R570 drivers do; R580 and an
 * unset branch serve v3 too. The version is the top byte of the struct's
 * first word (NVML_STRUCT_VERSION). */
static unsigned int fabric_max_version(void) {
    const struct entry *e = find("driver_branch");
    return e && e->value && strcmp(e->value, "R570") == 0 ? 2 : 3;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfoV_t *info) {
    DEVICE_CALL("nvmlDeviceGetGpuFabricInfoV", d, gpu);
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int version = info->version, asked = version >> 24;
    if (asked < 2 || asked > fabric_max_version()) return 25;
    /* v2 ends before healthSummary: write only what its caller allocated. */
    size_t size = asked == 2 ? offsetof(nvmlGpuFabricInfoV_t, healthSummary) : sizeof *info;
    memset(info, 0, size);
    info->version = version;
    unsigned long long mask = 0;
    gpu_u64(gpu, "fabric_health_mask", &mask);
    nvmlReturn_t r = fabric(gpu, &info->state, &info->status, &info->cliqueId, info->clusterUuid);
    if (r == NVML_SUCCESS) info->healthMask = (unsigned int)mask;
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos) {
    DEVICE_CALL("nvmlDeviceGetComputeRunningProcesses_v3", d, gpu);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    /* The processes of the GPU's own list if it has one, else of the defaults. */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gpus.%d.procs", gpu);
    if (!find(prefix)) snprintf(prefix, sizeof prefix, "defaults.procs");
    unsigned int n = 0;
    char key[128];
    for (;; n++) {
        snprintf(key, sizeof key, "%s.%u.pid", prefix, n);
        if (!find(key)) break;
    }
    if (*count < n || (n && !infos)) {
        *count = n;
        return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s.%u.pid", prefix, i);
        infos[i].pid = (unsigned int)strtoul(find(key)->value, NULL, 0);
        snprintf(key, sizeof key, "%s.%u.used_mib", prefix, i);
        const struct entry *e = find(key);
        infos[i].usedGpuMemory = (e && e->value ? strtoull(e->value, NULL, 0) : 0) << 20;
        infos[i].gpuInstanceId = 0xFFFFFFFF;
        infos[i].computeInstanceId = 0xFFFFFFFF;
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *memory) {
    DEVICE_CALL("nvmlDeviceGetMemoryInfo_v2", d, gpu);
    unsigned long long total, used, reserved = 0;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_u64(gpu, "mem_total_mib", &total) || gpu_u64(gpu, "mem_used_mib", &used))
        return NVML_ERROR_NOT_SUPPORTED;
    gpu_u64(gpu, "mem_reserved_mib", &reserved);
    memory->total = total << 20;
    memory->used = used << 20;
    memory->reserved = reserved << 20;
    memory->free = (total - used - reserved) << 20;
    return NVML_SUCCESS;
}
