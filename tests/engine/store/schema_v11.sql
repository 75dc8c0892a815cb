-- The session schema 11: schema 6 as it was written by hand, before each table's SQL was
-- derived from its declaration, the two columns 7 added (requests' t_first_answer_ns,
-- chunks' reasoning), the two 8 added (requests' conversation_id and turn), the three
-- tables of a run's prediction 9 added, what 10 added (requests' worker, the table
-- remote_origin) and what 11 added (requests' trace_line): a fresh file must have these
-- tables and columns.
CREATE TABLE session (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    app_version TEXT NOT NULL,
    name TEXT NOT NULL,
    experiment_path TEXT,
    experiment_toml TEXT NOT NULL,
    mode TEXT NOT NULL,
    base_url TEXT,
    hardware_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    error TEXT,
    clock_origin_ns INTEGER NOT NULL,
    wall_origin REAL NOT NULL
);
CREATE TABLE configs (
    idx INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    server_json TEXT NOT NULL,
    workload_json TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    error TEXT,
    base_url TEXT,
    pid INTEGER,
    command_json TEXT,
    log_path TEXT,
    log_tail TEXT,
    facts_json TEXT,
    slots INTEGER
);
CREATE TABLE requests (
    config_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    repeat INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    t_scheduled_ns INTEGER,
    t_submit_ns INTEGER,
    t_first_token_ns INTEGER,
    t_last_token_ns INTEGER,
    t_done_ns INTEGER,
    http_status INTEGER,
    ok INTEGER NOT NULL,
    error TEXT,
    finish_reason TEXT,
    usage_json TEXT,
    timings_json TEXT,
    output_tokens INTEGER,
    token_source TEXT,
    text TEXT,
    t_intended_ns INTEGER,
    t_ready_ns INTEGER,
    connect_ns INTEGER,
    t_connected_ns INTEGER,
    prompt_tokens INTEGER,
    streamed INTEGER,
    t_first_answer_ns INTEGER,
    conversation_id TEXT,
    turn INTEGER,
    worker INTEGER,
    trace_line INTEGER,
    PRIMARY KEY (config_idx, idx)
);
CREATE TABLE chunks (
    config_idx INTEGER NOT NULL,
    request_idx INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    text TEXT NOT NULL,
    reasoning INTEGER,
    PRIMARY KEY (config_idx, request_idx, seq)
) WITHOUT ROWID;
CREATE TABLE process_samples (
    config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, rss_bytes INTEGER, cpu_percent REAL
);
CREATE TABLE gpu_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, gpu_bytes INTEGER);
CREATE TABLE request_slots (
    config_idx INTEGER NOT NULL, idx INTEGER NOT NULL, slot INTEGER NOT NULL,
    PRIMARY KEY (config_idx, idx)
);
CREATE TABLE client_load (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL,
    wall_s REAL NOT NULL, loop_cpu_s REAL NOT NULL, process_cpu_s REAL NOT NULL,
    PRIMARY KEY (config_idx, repeat)
);
CREATE TABLE machine_load (
    wall_s REAL NOT NULL, cores INTEGER NOT NULL, other_cpu_s REAL NOT NULL, steal_s REAL,
    load_avg REAL, swap_in_bytes INTEGER, swap_out_bytes INTEGER, memory_pressure_s REAL,
    cpu_freq_share REAL, gpu_other_processes INTEGER, judged INTEGER NOT NULL,
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL,
    PRIMARY KEY (config_idx, repeat)
);
CREATE TABLE server_counters (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL, before_json TEXT, after_json TEXT,
    PRIMARY KEY (config_idx, repeat)
);
CREATE TABLE metrics_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, values_json TEXT);
CREATE TABLE slots_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, slots_json TEXT);
CREATE TABLE server_states (
    config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, state TEXT NOT NULL, detail TEXT
);
CREATE TABLE notices (t_ns INTEGER NOT NULL, config_idx INTEGER, level TEXT, text TEXT);
CREATE TABLE import_source (
    id INTEGER PRIMARY KEY CHECK (id = 1), tool TEXT NOT NULL, version TEXT, file_name TEXT NOT NULL
);
CREATE TABLE reported_figures (
    config_idx INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (config_idx, name)
);
CREATE TABLE predictions (
    config_idx INTEGER PRIMARY KEY, label TEXT NOT NULL, summary_json TEXT NOT NULL,
    requests_s REAL NOT NULL, calibration TEXT NOT NULL
);
CREATE TABLE predicted_requests (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL, idx INTEGER NOT NULL, slot INTEGER,
    sent_s REAL NOT NULL, first_token_s REAL, end_s REAL NOT NULL,
    PRIMARY KEY (config_idx, repeat, idx)
) WITHOUT ROWID;
CREATE TABLE prediction_left_out (place INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE remote_origin (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    host TEXT NOT NULL,
    run_id TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    protocol INTEGER NOT NULL,
    clock_offset_ns INTEGER,
    rtt_ns INTEGER,
    received_all INTEGER NOT NULL
);
