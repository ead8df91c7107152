; Inno Setup script: installs the PyInstaller one-folder bundle with a Start-menu shortcut.
;
;   iscc /DAppVersion=0.1.0 /DBundleDir=C:\src\qwen-mtp-desktop\dist\qwen-mtp-desktop ^
;        /DOutputDir=C:\src\qwen-mtp-desktop\dist packaging\windows\qwen_mtp_desktop.iss
;
; packaging\build.py passes these defines when iscc (Inno Setup 6) is on PATH.
; Installs per user by default (no admin prompt); the dialog offers an all-users install.

#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif
#ifndef BundleDir
  #define BundleDir "..\..\dist\qwen-mtp-desktop"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif
#ifndef IconFile
  #define IconFile "..\..\build\pyinstaller\qwen_mtp_desktop\icons\app.ico"
#endif
#define AppName "Qwen MTP Desktop"
#define AppId "qwen-mtp-desktop"
#define AppExe "qwen-mtp-desktop.exe"

[Setup]
AppId={{6F1C3A52-7E0B-4C1E-9C55-0B7A51D3C8E4}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=Qwen MTP Desktop contributors
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#OutputDir}
OutputBaseFilename={#AppId}-{#AppVersion}-setup
SetupIconFile={#IconFile}
UninstallDisplayIcon={app}\{#AppExe}
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\{#AppExe}"
Name: "{group}\Uninstall {#AppName}"; Filename: "{uninstallexe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent
