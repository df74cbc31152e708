-- The console function logs in with the replay function's login when re-drive is on
-- (template.yaml, ConsoleRedrive=true; read-only it uses the auditor's): its overview reads the
-- auditor's figures live (shared::audit::peek), which read the last recorded run from
-- audit_run. SELECT only: recording a run (UPDATE) stays the auditor's.
GRANT SELECT ON audit_run TO hookledger_replay;
