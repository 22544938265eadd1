//! The columns of PostgreSQL 15's catalog tables and views, as
//! `name type` pairs (read from a PostgreSQL 15 server's own catalog).
//! Types are PostgreSQL's names; [`super::table::arrow_type`] maps them to
//! Arrow. A column no row of Silt's fills is null (or `false`, `0`, as its
//! type's zero: see [`super::table`]).

/// Every catalog relation Silt serves: name, `r` table or `v` view, and
/// its columns in order.
pub const RELATIONS: &[(&str, char, &str)] = &[
    (
        "pg_aggregate",
        'r',
        "aggfnoid regproc, aggkind char, aggnumdirectargs int2, aggtransfn regproc, aggfinalfn \
         regproc, aggcombinefn regproc, aggserialfn regproc, aggdeserialfn regproc, aggmtransfn \
         regproc, aggminvtransfn regproc, aggmfinalfn regproc, aggfinalextra bool, aggmfinalextra \
         bool, aggfinalmodify char, aggmfinalmodify char, aggsortop oid, aggtranstype oid, \
         aggtransspace int4, aggmtranstype oid, aggmtransspace int4, agginitval text, aggminitval \
         text",
    ),
    (
        "pg_am",
        'r',
        "oid oid, amname name, amhandler regproc, amtype char",
    ),
    (
        "pg_amop",
        'r',
        "oid oid, amopfamily oid, amoplefttype oid, amoprighttype oid, amopstrategy int2, \
         amoppurpose char, amopopr oid, amopmethod oid, amopsortfamily oid",
    ),
    (
        "pg_amproc",
        'r',
        "oid oid, amprocfamily oid, amproclefttype oid, amprocrighttype oid, amprocnum int2, \
         amproc regproc",
    ),
    (
        "pg_attrdef",
        'r',
        "oid oid, adrelid oid, adnum int2, adbin pg_node_tree",
    ),
    (
        "pg_attribute",
        'r',
        "attrelid oid, attname name, atttypid oid, attstattarget int4, attlen int2, attnum int2, \
         attndims int4, attcacheoff int4, atttypmod int4, attbyval bool, attalign char, \
         attstorage char, attcompression char, attnotnull bool, atthasdef bool, atthasmissing \
         bool, attidentity char, attgenerated char, attisdropped bool, attislocal bool, \
         attinhcount int4, attcollation oid, attacl aclitem[], attoptions text[], attfdwoptions \
         text[], attmissingval anyarray",
    ),
    (
        "pg_auth_members",
        'r',
        "roleid oid, member oid, grantor oid, admin_option bool",
    ),
    (
        "pg_authid",
        'r',
        "oid oid, rolname name, rolsuper bool, rolinherit bool, rolcreaterole bool, rolcreatedb \
         bool, rolcanlogin bool, rolreplication bool, rolbypassrls bool, rolconnlimit int4, \
         rolpassword text, rolvaliduntil timestamptz",
    ),
    (
        "pg_available_extensions",
        'v',
        "name name, default_version text, installed_version text, comment text",
    ),
    (
        "pg_cast",
        'r',
        "oid oid, castsource oid, casttarget oid, castfunc oid, castcontext char, castmethod char",
    ),
    (
        "pg_class",
        'r',
        "oid oid, relname name, relnamespace oid, reltype oid, reloftype oid, relowner oid, relam \
         oid, relfilenode oid, reltablespace oid, relpages int4, reltuples float4, relallvisible \
         int4, reltoastrelid oid, relhasindex bool, relisshared bool, relpersistence char, \
         relkind char, relnatts int2, relchecks int2, relhasrules bool, relhastriggers bool, \
         relhassubclass bool, relrowsecurity bool, relforcerowsecurity bool, relispopulated bool, \
         relreplident char, relispartition bool, relrewrite oid, relfrozenxid xid, relminmxid \
         xid, relacl aclitem[], reloptions text[], relpartbound pg_node_tree",
    ),
    (
        "pg_collation",
        'r',
        "oid oid, collname name, collnamespace oid, collowner oid, collprovider char, \
         collisdeterministic bool, collencoding int4, collcollate text, collctype text, \
         colliculocale text, collversion text",
    ),
    (
        "pg_constraint",
        'r',
        "oid oid, conname name, connamespace oid, contype char, condeferrable bool, condeferred \
         bool, convalidated bool, conrelid oid, contypid oid, conindid oid, conparentid oid, \
         confrelid oid, confupdtype char, confdeltype char, confmatchtype char, conislocal bool, \
         coninhcount int4, connoinherit bool, conkey int2[], confkey int2[], conpfeqop oid[], \
         conppeqop oid[], conffeqop oid[], confdelsetcols int2[], conexclop oid[], conbin \
         pg_node_tree",
    ),
    (
        "pg_conversion",
        'r',
        "oid oid, conname name, connamespace oid, conowner oid, conforencoding int4, \
         contoencoding int4, conproc regproc, condefault bool",
    ),
    (
        "pg_database",
        'r',
        "oid oid, datname name, datdba oid, encoding int4, datlocprovider char, datistemplate \
         bool, datallowconn bool, datconnlimit int4, datfrozenxid xid, datminmxid xid, \
         dattablespace oid, datcollate text, datctype text, daticulocale text, datcollversion \
         text, datacl aclitem[]",
    ),
    (
        "pg_db_role_setting",
        'r',
        "setdatabase oid, setrole oid, setconfig text[]",
    ),
    (
        "pg_default_acl",
        'r',
        "oid oid, defaclrole oid, defaclnamespace oid, defaclobjtype char, defaclacl aclitem[]",
    ),
    (
        "pg_depend",
        'r',
        "classid oid, objid oid, objsubid int4, refclassid oid, refobjid oid, refobjsubid int4, \
         deptype char",
    ),
    (
        "pg_description",
        'r',
        "objoid oid, classoid oid, objsubid int4, description text",
    ),
    (
        "pg_enum",
        'r',
        "oid oid, enumtypid oid, enumsortorder float4, enumlabel name",
    ),
    (
        "pg_event_trigger",
        'r',
        "oid oid, evtname name, evtevent name, evtowner oid, evtfoid oid, evtenabled char, \
         evttags text[]",
    ),
    (
        "pg_extension",
        'r',
        "oid oid, extname name, extowner oid, extnamespace oid, extrelocatable bool, extversion \
         text, extconfig oid[], extcondition text[]",
    ),
    (
        "pg_foreign_data_wrapper",
        'r',
        "oid oid, fdwname name, fdwowner oid, fdwhandler oid, fdwvalidator oid, fdwacl aclitem[], \
         fdwoptions text[]",
    ),
    (
        "pg_foreign_server",
        'r',
        "oid oid, srvname name, srvowner oid, srvfdw oid, srvtype text, srvversion text, srvacl \
         aclitem[], srvoptions text[]",
    ),
    (
        "pg_foreign_table",
        'r',
        "ftrelid oid, ftserver oid, ftoptions text[]",
    ),
    (
        "pg_index",
        'r',
        "indexrelid oid, indrelid oid, indnatts int2, indnkeyatts int2, indisunique bool, \
         indnullsnotdistinct bool, indisprimary bool, indisexclusion bool, indimmediate bool, \
         indisclustered bool, indisvalid bool, indcheckxmin bool, indisready bool, indislive \
         bool, indisreplident bool, indkey int2vector, indcollation oidvector, indclass \
         oidvector, indoption int2vector, indexprs pg_node_tree, indpred pg_node_tree",
    ),
    (
        "pg_indexes",
        'v',
        "schemaname name, tablename name, indexname name, tablespace name, indexdef text",
    ),
    (
        "pg_inherits",
        'r',
        "inhrelid oid, inhparent oid, inhseqno int4, inhdetachpending bool",
    ),
    (
        "pg_init_privs",
        'r',
        "objoid oid, classoid oid, objsubid int4, privtype char, initprivs aclitem[]",
    ),
    (
        "pg_language",
        'r',
        "oid oid, lanname name, lanowner oid, lanispl bool, lanpltrusted bool, lanplcallfoid oid, \
         laninline oid, lanvalidator oid, lanacl aclitem[]",
    ),
    (
        "pg_largeobject_metadata",
        'r',
        "oid oid, lomowner oid, lomacl aclitem[]",
    ),
    (
        "pg_locks",
        'v',
        "locktype text, database oid, relation oid, page int4, tuple int2, virtualxid text, \
         transactionid xid, classid oid, objid oid, objsubid int2, virtualtransaction text, pid \
         int4, mode text, granted bool, fastpath bool, waitstart timestamptz",
    ),
    (
        "pg_matviews",
        'v',
        "schemaname name, matviewname name, matviewowner name, tablespace name, hasindexes bool, \
         ispopulated bool, definition text",
    ),
    (
        "pg_namespace",
        'r',
        "oid oid, nspname name, nspowner oid, nspacl aclitem[]",
    ),
    (
        "pg_opclass",
        'r',
        "oid oid, opcmethod oid, opcname name, opcnamespace oid, opcowner oid, opcfamily oid, \
         opcintype oid, opcdefault bool, opckeytype oid",
    ),
    (
        "pg_operator",
        'r',
        "oid oid, oprname name, oprnamespace oid, oprowner oid, oprkind char, oprcanmerge bool, \
         oprcanhash bool, oprleft oid, oprright oid, oprresult oid, oprcom oid, oprnegate oid, \
         oprcode regproc, oprrest regproc, oprjoin regproc",
    ),
    (
        "pg_opfamily",
        'r',
        "oid oid, opfmethod oid, opfname name, opfnamespace oid, opfowner oid",
    ),
    (
        "pg_partitioned_table",
        'r',
        "partrelid oid, partstrat char, partnatts int2, partdefid oid, partattrs int2vector, \
         partclass oidvector, partcollation oidvector, partexprs pg_node_tree",
    ),
    (
        "pg_policy",
        'r',
        "oid oid, polname name, polrelid oid, polcmd char, polpermissive bool, polroles oid[], \
         polqual pg_node_tree, polwithcheck pg_node_tree",
    ),
    (
        "pg_prepared_xacts",
        'v',
        "transaction xid, gid text, prepared timestamptz, owner name, database name",
    ),
    (
        "pg_proc",
        'r',
        "oid oid, proname name, pronamespace oid, proowner oid, prolang oid, procost float4, \
         prorows float4, provariadic oid, prosupport regproc, prokind char, prosecdef bool, \
         proleakproof bool, proisstrict bool, proretset bool, provolatile char, proparallel char, \
         pronargs int2, pronargdefaults int2, prorettype oid, proargtypes oidvector, \
         proallargtypes oid[], proargmodes char[], proargnames text[], proargdefaults \
         pg_node_tree, protrftypes oid[], prosrc text, probin text, prosqlbody pg_node_tree, \
         proconfig text[], proacl aclitem[]",
    ),
    (
        "pg_publication",
        'r',
        "oid oid, pubname name, pubowner oid, puballtables bool, pubinsert bool, pubupdate bool, \
         pubdelete bool, pubtruncate bool, pubviaroot bool",
    ),
    (
        "pg_publication_namespace",
        'r',
        "oid oid, pnpubid oid, pnnspid oid",
    ),
    (
        "pg_publication_rel",
        'r',
        "oid oid, prpubid oid, prrelid oid, prqual pg_node_tree, prattrs int2vector",
    ),
    (
        "pg_range",
        'r',
        "rngtypid oid, rngsubtype oid, rngmultitypid oid, rngcollation oid, rngsubopc oid, \
         rngcanonical regproc, rngsubdiff regproc",
    ),
    (
        "pg_replication_slots",
        'v',
        "slot_name name, plugin name, slot_type text, datoid oid, database name, temporary bool, \
         active bool, active_pid int4, xmin xid, catalog_xmin xid, restart_lsn pg_lsn, \
         confirmed_flush_lsn pg_lsn, wal_status text, safe_wal_size int8, two_phase bool",
    ),
    (
        "pg_rewrite",
        'r',
        "oid oid, rulename name, ev_class oid, ev_type char, ev_enabled char, is_instead bool, \
         ev_qual pg_node_tree, ev_action pg_node_tree",
    ),
    (
        "pg_roles",
        'v',
        "rolname name, rolsuper bool, rolinherit bool, rolcreaterole bool, rolcreatedb bool, \
         rolcanlogin bool, rolreplication bool, rolconnlimit int4, rolpassword text, \
         rolvaliduntil timestamptz, rolbypassrls bool, rolconfig text[], oid oid",
    ),
    (
        "pg_seclabel",
        'r',
        "objoid oid, classoid oid, objsubid int4, provider text, label text",
    ),
    (
        "pg_sequence",
        'r',
        "seqrelid oid, seqtypid oid, seqstart int8, seqincrement int8, seqmax int8, seqmin int8, \
         seqcache int8, seqcycle bool",
    ),
    (
        "pg_sequences",
        'v',
        "schemaname name, sequencename name, sequenceowner name, data_type regtype, start_value \
         int8, min_value int8, max_value int8, increment_by int8, cycle bool, cache_size int8, \
         last_value int8",
    ),
    (
        "pg_settings",
        'v',
        "name text, setting text, unit text, category text, short_desc text, extra_desc text, \
         context text, vartype text, source text, min_val text, max_val text, enumvals text[], \
         boot_val text, reset_val text, sourcefile text, sourceline int4, pending_restart bool",
    ),
    (
        "pg_shdescription",
        'r',
        "objoid oid, classoid oid, description text",
    ),
    (
        "pg_stat_activity",
        'v',
        "datid oid, datname name, pid int4, leader_pid int4, usesysid oid, usename name, \
         application_name text, client_addr inet, client_hostname text, client_port int4, \
         backend_start timestamptz, xact_start timestamptz, query_start timestamptz, state_change \
         timestamptz, wait_event_type text, wait_event text, state text, backend_xid xid, \
         backend_xmin xid, query_id int8, query text, backend_type text",
    ),
    (
        "pg_stat_database",
        'v',
        "datid oid, datname name, numbackends int4, xact_commit int8, xact_rollback int8, \
         blks_read int8, blks_hit int8, tup_returned int8, tup_fetched int8, tup_inserted int8, \
         tup_updated int8, tup_deleted int8, conflicts int8, temp_files int8, temp_bytes int8, \
         deadlocks int8, checksum_failures int8, checksum_last_failure timestamptz, blk_read_time \
         float8, blk_write_time float8, session_time float8, active_time float8, \
         idle_in_transaction_time float8, sessions int8, sessions_abandoned int8, sessions_fatal \
         int8, sessions_killed int8, stats_reset timestamptz",
    ),
    (
        "pg_stat_replication",
        'v',
        "pid int4, usesysid oid, usename name, application_name text, client_addr inet, \
         client_hostname text, client_port int4, backend_start timestamptz, backend_xmin xid, \
         state text, sent_lsn pg_lsn, write_lsn pg_lsn, flush_lsn pg_lsn, replay_lsn pg_lsn, \
         write_lag interval, flush_lag interval, replay_lag interval, sync_priority int4, \
         sync_state text, reply_time timestamptz",
    ),
    (
        "pg_stat_user_tables",
        'v',
        "relid oid, schemaname name, relname name, seq_scan int8, seq_tup_read int8, idx_scan \
         int8, idx_tup_fetch int8, n_tup_ins int8, n_tup_upd int8, n_tup_del int8, n_tup_hot_upd \
         int8, n_live_tup int8, n_dead_tup int8, n_mod_since_analyze int8, n_ins_since_vacuum \
         int8, last_vacuum timestamptz, last_autovacuum timestamptz, last_analyze timestamptz, \
         last_autoanalyze timestamptz, vacuum_count int8, autovacuum_count int8, analyze_count \
         int8, autoanalyze_count int8",
    ),
    (
        "pg_statio_user_tables",
        'v',
        "relid oid, schemaname name, relname name, heap_blks_read int8, heap_blks_hit int8, \
         idx_blks_read int8, idx_blks_hit int8, toast_blks_read int8, toast_blks_hit int8, \
         tidx_blks_read int8, tidx_blks_hit int8",
    ),
    (
        "pg_statistic_ext",
        'r',
        "oid oid, stxrelid oid, stxname name, stxnamespace oid, stxowner oid, stxstattarget int4, \
         stxkeys int2vector, stxkind char[], stxexprs pg_node_tree",
    ),
    (
        "pg_statistic_ext_data",
        'r',
        "stxoid oid, stxdinherit bool, stxdndistinct pg_ndistinct, stxddependencies \
         pg_dependencies, stxdmcv pg_mcv_list, stxdexpr pg_statistic[]",
    ),
    (
        "pg_subscription",
        'r',
        "oid oid, subdbid oid, subskiplsn pg_lsn, subname name, subowner oid, subenabled bool, \
         subbinary bool, substream bool, subtwophasestate char, subdisableonerr bool, subconninfo \
         text, subslotname name, subsynccommit text, subpublications text[]",
    ),
    (
        "pg_tables",
        'v',
        "schemaname name, tablename name, tableowner name, tablespace name, hasindexes bool, \
         hasrules bool, hastriggers bool, rowsecurity bool",
    ),
    (
        "pg_tablespace",
        'r',
        "oid oid, spcname name, spcowner oid, spcacl aclitem[], spcoptions text[]",
    ),
    (
        "pg_timezone_names",
        'v',
        "name text, abbrev text, utc_offset interval, is_dst bool",
    ),
    (
        "pg_transform",
        'r',
        "oid oid, trftype oid, trflang oid, trffromsql regproc, trftosql regproc",
    ),
    (
        "pg_trigger",
        'r',
        "oid oid, tgrelid oid, tgparentid oid, tgname name, tgfoid oid, tgtype int2, tgenabled \
         char, tgisinternal bool, tgconstrrelid oid, tgconstrindid oid, tgconstraint oid, \
         tgdeferrable bool, tginitdeferred bool, tgnargs int2, tgattr int2vector, tgargs bytea, \
         tgqual pg_node_tree, tgoldtable name, tgnewtable name",
    ),
    (
        "pg_ts_config",
        'r',
        "oid oid, cfgname name, cfgnamespace oid, cfgowner oid, cfgparser oid",
    ),
    (
        "pg_ts_dict",
        'r',
        "oid oid, dictname name, dictnamespace oid, dictowner oid, dicttemplate oid, \
         dictinitoption text",
    ),
    (
        "pg_ts_parser",
        'r',
        "oid oid, prsname name, prsnamespace oid, prsstart regproc, prstoken regproc, prsend \
         regproc, prsheadline regproc, prslextype regproc",
    ),
    (
        "pg_ts_template",
        'r',
        "oid oid, tmplname name, tmplnamespace oid, tmplinit regproc, tmpllexize regproc",
    ),
    (
        "pg_type",
        'r',
        "oid oid, typname name, typnamespace oid, typowner oid, typlen int2, typbyval bool, \
         typtype char, typcategory char, typispreferred bool, typisdefined bool, typdelim char, \
         typrelid oid, typsubscript regproc, typelem oid, typarray oid, typinput regproc, \
         typoutput regproc, typreceive regproc, typsend regproc, typmodin regproc, typmodout \
         regproc, typanalyze regproc, typalign char, typstorage char, typnotnull bool, \
         typbasetype oid, typtypmod int4, typndims int4, typcollation oid, typdefaultbin \
         pg_node_tree, typdefault text, typacl aclitem[]",
    ),
    (
        "pg_user",
        'v',
        "usename name, usesysid oid, usecreatedb bool, usesuper bool, userepl bool, usebypassrls \
         bool, passwd text, valuntil timestamptz, useconfig text[]",
    ),
    (
        "pg_user_mapping",
        'r',
        "oid oid, umuser oid, umserver oid, umoptions text[]",
    ),
    (
        "pg_views",
        'v',
        "schemaname name, viewname name, viewowner name, definition text",
    ),
];

/// The views of PostgreSQL 15's `information_schema` Silt serves, and
/// their columns (its domains `sql_identifier`, `cardinal_number`,
/// `character_data`, `yes_or_no` and `time_stamp` as their base types).
/// `routines`, `parameters` and DataFusion's `df_settings` are DataFusion's
/// own (its `SHOW FUNCTIONS` and `SHOW` read them).
pub const INFORMATION_SCHEMA: &[(&str, &str)] = &[
    (
        "applicable_roles",
        "grantee name, role_name name, is_grantable text",
    ),
    (
        "character_sets",
        "character_set_catalog name, character_set_schema name, character_set_name name, \
         character_repertoire name, form_of_use name, default_collate_catalog name, \
         default_collate_schema name, default_collate_name name",
    ),
    (
        "check_constraints",
        "constraint_catalog name, constraint_schema name, constraint_name name, check_clause text",
    ),
    (
        "column_privileges",
        "grantor name, grantee name, table_catalog name, table_schema name, table_name name, \
         column_name name, privilege_type text, is_grantable text",
    ),
    (
        "columns",
        "table_catalog name, table_schema name, table_name name, column_name name, \
         ordinal_position int4, column_default text, is_nullable text, data_type text, \
         character_maximum_length int4, character_octet_length int4, numeric_precision int4, \
         numeric_precision_radix int4, numeric_scale int4, datetime_precision int4, interval_type \
         text, interval_precision int4, character_set_catalog name, character_set_schema name, \
         character_set_name name, collation_catalog name, collation_schema name, collation_name \
         name, domain_catalog name, domain_schema name, domain_name name, udt_catalog name, \
         udt_schema name, udt_name name, scope_catalog name, scope_schema name, scope_name name, \
         maximum_cardinality int4, dtd_identifier name, is_self_referencing text, is_identity \
         text, identity_generation text, identity_start text, identity_increment text, \
         identity_maximum text, identity_minimum text, identity_cycle text, is_generated text, \
         generation_expression text, is_updatable text",
    ),
    (
        "constraint_column_usage",
        "table_catalog name, table_schema name, table_name name, column_name name, \
         constraint_catalog name, constraint_schema name, constraint_name name",
    ),
    (
        "domains",
        "domain_catalog name, domain_schema name, domain_name name, data_type text, \
         character_maximum_length int4, character_octet_length int4, character_set_catalog name, \
         character_set_schema name, character_set_name name, collation_catalog name, \
         collation_schema name, collation_name name, numeric_precision int4, \
         numeric_precision_radix int4, numeric_scale int4, datetime_precision int4, interval_type \
         text, interval_precision int4, domain_default text, udt_catalog name, udt_schema name, \
         udt_name name, scope_catalog name, scope_schema name, scope_name name, \
         maximum_cardinality int4, dtd_identifier name",
    ),
    (
        "element_types",
        "object_catalog name, object_schema name, object_name name, object_type text, \
         collection_type_identifier name, data_type text, character_maximum_length int4, \
         character_octet_length int4, character_set_catalog name, character_set_schema name, \
         character_set_name name, collation_catalog name, collation_schema name, collation_name \
         name, numeric_precision int4, numeric_precision_radix int4, numeric_scale int4, \
         datetime_precision int4, interval_type text, interval_precision int4, domain_default \
         text, udt_catalog name, udt_schema name, udt_name name, scope_catalog name, scope_schema \
         name, scope_name name, maximum_cardinality int4, dtd_identifier name",
    ),
    ("enabled_roles", "role_name name"),
    (
        "key_column_usage",
        "constraint_catalog name, constraint_schema name, constraint_name name, table_catalog \
         name, table_schema name, table_name name, column_name name, ordinal_position int4, \
         position_in_unique_constraint int4",
    ),
    (
        "referential_constraints",
        "constraint_catalog name, constraint_schema name, constraint_name name, \
         unique_constraint_catalog name, unique_constraint_schema name, unique_constraint_name \
         name, match_option text, update_rule text, delete_rule text",
    ),
    (
        "schemata",
        "catalog_name name, schema_name name, schema_owner name, default_character_set_catalog \
         name, default_character_set_schema name, default_character_set_name name, sql_path text",
    ),
    (
        "sequences",
        "sequence_catalog name, sequence_schema name, sequence_name name, data_type text, \
         numeric_precision int4, numeric_precision_radix int4, numeric_scale int4, start_value \
         text, minimum_value text, maximum_value text, increment text, cycle_option text",
    ),
    (
        "table_constraints",
        "constraint_catalog name, constraint_schema name, constraint_name name, table_catalog \
         name, table_schema name, table_name name, constraint_type text, is_deferrable text, \
         initially_deferred text, enforced text, nulls_distinct text",
    ),
    (
        "table_privileges",
        "grantor name, grantee name, table_catalog name, table_schema name, table_name name, \
         privilege_type text, is_grantable text, with_hierarchy text",
    ),
    (
        "tables",
        "table_catalog name, table_schema name, table_name name, table_type text, \
         self_referencing_column_name name, reference_generation text, user_defined_type_catalog \
         name, user_defined_type_schema name, user_defined_type_name name, is_insertable_into \
         text, is_typed text, commit_action text",
    ),
    (
        "triggers",
        "trigger_catalog name, trigger_schema name, trigger_name name, event_manipulation text, \
         event_object_catalog name, event_object_schema name, event_object_table name, \
         action_order int4, action_condition text, action_statement text, action_orientation \
         text, action_timing text, action_reference_old_table name, action_reference_new_table \
         name, action_reference_old_row name, action_reference_new_row name, created timestamptz",
    ),
    (
        "usage_privileges",
        "grantor name, grantee name, object_catalog name, object_schema name, object_name name, \
         object_type text, privilege_type text, is_grantable text",
    ),
    (
        "views",
        "table_catalog name, table_schema name, table_name name, view_definition text, \
         check_option text, is_updatable text, is_insertable_into text, is_trigger_updatable \
         text, is_trigger_deletable text, is_trigger_insertable_into text",
    ),
];
