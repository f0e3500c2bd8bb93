% vantage_inprocess.m - push each Vantage RcvData frame into an in-process usbeam session
% through MATLAB's Python interface (MATLAB R2022a+; pyenv pointing at the Python that has
% usbeam installed, and this examples/ folder on the Python path).
%
% Add to the SetUp script, after the sequence is defined:
%     Process(1).classname = 'External';
%     Process(1).method = 'usbeamPush';
%     Process(1).Parameters = {'srcbuffer','receive', 'srcbufnum',1, 'srcframenum',-1, 'dstbuffer','none'};
% and an Event with .process = 1 after each frame's transfer-to-host (the usual
% ReturnToMatlab point).  Then, once before VSX runs the sequence:
%     usbeam_start('MySetup.mat');
% The callback below receives RData = RcvData{1}(:,:,frame): int16, rows x channels.
% (Not run against hardware here: tests/test_live_vantage.py calls the same Python
% functions with arrays laid out as the Vantage lays them out.)

function usbeam_start(workspace)
    if count(py.sys.path, fileparts(mfilename('fullpath'))) == 0
        insert(py.sys.path, int32(0), fileparts(mfilename('fullpath')));
    end
    py.vantage_bridge.start(workspace, int32(3), 'drop_oldest');
end

function usbeamPush(RData)
    % MATLAB hands the int16 matrix to NumPy without a copy (column-major); usbeam maps
    % the channels while copying it into its slot, so this returns at once.
    py.vantage_bridge.push(RData);
    persistent hImage
    img = uint8(py.vantage_bridge.latest());
    if ~isempty(img)
        if isempty(hImage) || ~isvalid(hImage)
            figure; hImage = imagesc(img'); colormap gray; axis image;
        else
            set(hImage, 'CData', img');
        end
        drawnow limitrate;
    end
end
