PRAGMA user_version = 4;
BEGIN TRANSACTION;
CREATE TABLE chunks (
    config_idx INTEGER NOT NULL,
    request_idx INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (config_idx, request_idx, seq)
) WITHOUT ROWID;
INSERT INTO "chunks" VALUES(0,1,0,200,'Once');
INSERT INTO "chunks" VALUES(0,1,1,300,' upon');
INSERT INTO "chunks" VALUES(0,1,2,400,' a');
CREATE TABLE client_load (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL,
    wall_s REAL NOT NULL, loop_cpu_s REAL NOT NULL, process_cpu_s REAL NOT NULL,
    PRIMARY KEY (config_idx, repeat)
);
INSERT INTO "client_load" VALUES(0,0,2.5,0.25,0.5);
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
INSERT INTO "configs" VALUES(0,'np=2','{"slots": 2, "ctx": 2048}','{"requests": 3, "max_tokens": 4}','ok',NULL,'http://127.0.0.1:8080/v1',4242,'["llama-server", "-np", "2", "-c", "2048"]','/tmp/server.log','last lines of the log','{"n_slots": 2, "n_ctx_slot": 1024, "kv_unified": false, "n_ctx": 2048, "kv_buffer_mib": 45.0, "model_buffer_mib": 92.5, "compute_buffer_mib": 62.9, "backend": "CPU", "build": "6123 (abc1234)", "devices": ["CPU"]}',2);
INSERT INTO "configs" VALUES(1,'np=4','{"slots": 4, "ctx": 2048}','{"requests": 3, "max_tokens": 4}','failed','the server crashed',NULL,NULL,NULL,NULL,'its tail',NULL,NULL);
CREATE TABLE gpu_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, gpu_bytes INTEGER);
INSERT INTO "gpu_samples" VALUES(0,1000,5000000);
CREATE TABLE metrics_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, values_json TEXT);
INSERT INTO "metrics_samples" VALUES(0,1000,'{"llamacpp:requests_processing": 2.0}');
CREATE TABLE notices (t_ns INTEGER NOT NULL, config_idx INTEGER, level TEXT, text TEXT);
INSERT INTO "notices" VALUES(7,0,'warning','the first notice');
INSERT INTO "notices" VALUES(7,NULL,'info','a notice of no configuration');
CREATE TABLE process_samples (
    config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, rss_bytes INTEGER, cpu_percent REAL
);
INSERT INTO "process_samples" VALUES(0,1000,123456789,12.5);
CREATE TABLE request_slots (
    config_idx INTEGER NOT NULL, idx INTEGER NOT NULL, slot INTEGER NOT NULL,
    PRIMARY KEY (config_idx, idx)
);
INSERT INTO "request_slots" VALUES(0,1,1);
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
    PRIMARY KEY (config_idx, idx)
);
INSERT INTO "requests" VALUES(0,0,0,1,'warm',NULL,5,NULL,NULL,50,200,1,NULL,NULL,NULL,NULL,0,'none','',NULL,NULL,NULL,NULL);
INSERT INTO "requests" VALUES(0,1,0,0,'Tell me a story',95,100,200,400,410,200,1,NULL,'length','{"completion_tokens": 3, "prompt_tokens": 7}','{"prompt_ms": 12.5, "predicted_n": 3, "cache_n": 0}',3,'usage','Once upon a',90,97,3,99);
INSERT INTO "requests" VALUES(0,2,0,0,'p',500,510,NULL,NULL,520,503,0,'HTTP 503: busy',NULL,NULL,NULL,NULL,'none','',NULL,NULL,NULL,NULL);
CREATE TABLE server_counters (
    config_idx INTEGER NOT NULL, repeat INTEGER NOT NULL, before_json TEXT, after_json TEXT,
    PRIMARY KEY (config_idx, repeat)
);
INSERT INTO "server_counters" VALUES(0,0,'{"llamacpp:tokens_predicted_total": 1.0}','{"x": 4.0}');
CREATE TABLE server_states (
    config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, state TEXT NOT NULL, detail TEXT
);
INSERT INTO "server_states" VALUES(0,7,'starting','');
INSERT INTO "server_states" VALUES(0,7,'healthy','200 OK');
INSERT INTO "server_states" VALUES(1,7,'crashed','exit code 1');
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
INSERT INTO "session" VALUES(1,'any','known','exp.toml','[server]
','managed',NULL,'{"hostname": "known-host", "os": "Linux 6.1.0", "os_version": "#1 SMP", "machine": "x86_64", "cpu_model": "test CPU", "cpu_physical_cores": 4, "cpu_logical_cores": 8, "ram_bytes": 17179869184, "python": "3.11.9", "gpus": [{"name": "test GPU", "memory_bytes": 8589934592, "driver": "550.54"}], "apple_chip": "test chip", "llama_server": "/opt/llama.cpp/llama-server", "llama_server_build": "version: 6123 (abc1234)"}','then','later','complete',NULL,10,1.5);
CREATE TABLE slots_samples (config_idx INTEGER NOT NULL, t_ns INTEGER NOT NULL, slots_json TEXT);
INSERT INTO "slots_samples" VALUES(0,1000,'[{"id": 0, "is_processing": true}]');
COMMIT;
